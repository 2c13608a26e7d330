package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/agentpay/guard/transport"
)

// version prints what an operator reports with a problem: the build (the
// module's version, or the commit it was built from), the API version it
// serves and the Go release it was built with.
func version(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return usageErrorf("guard version takes no arguments (got %q)", args[0])
	}
	fmt.Fprintf(stdout, "guard %s\napi_version %s\n%s %s/%s\n", buildVersion(), transport.APIVersion,
		runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// buildVersion is the module version of a released build, or the commit
// of a build from a checkout ("+modified" when it had uncommitted
// changes), or "devel" for a build that recorded neither (-buildvcs=false),
// and "unknown" when the binary carries no build information at all.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	if rev == "" {
		return "devel" // built without version control stamping
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return "commit " + rev + modified
}
