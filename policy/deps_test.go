package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The architecture's dependency rules: policy is the pure core and imports
// only the standard library, apd and IDNA; transport reaches storage only
// through actors; actors never see the HTTP library.

const modulePath = "github.com/agentpay/guard"

type listedPackage struct {
	ImportPath string
	Standard   bool
	Imports    []string
	Deps       []string
	Error      *struct{ Err string }
}

// goList runs `go list -json` with args from the module root and decodes the
// stream of packages it prints.
func goList(t *testing.T, args ...string) []listedPackage {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to check dependencies: %v", err)
	}
	cmd := exec.Command(goTool, append([]string{"list", "-e", "-json"}, args...)...)
	cmd.Dir = filepath.Join("..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %v listed nothing", args)
	}
	return pkgs
}

// policyMayImport is the whole list of non-standard packages policy may
// depend on, directly or not.
func policyMayImport(path string) bool {
	switch {
	case path == "github.com/cockroachdb/apd/v3":
		return true
	case path == "golang.org/x/net/idna":
		return true
	case strings.HasPrefix(path, "golang.org/x/text/"): // needed by idna
		return true
	}
	return false
}

var forbiddenInPolicy = []string{
	modulePath + "/",
	"go.etcd.io/bbolt",
	"github.com/valyala/fasthttp",
	"github.com/fasthttp/",
	"github.com/asynkron/protoactor-go",
}

func TestPolicyDependsOnlyOnStdlibApdAndIDNA(t *testing.T) {
	pkgs := goList(t, "-deps", "./policy")
	self := modulePath + "/policy"
	var sawSelf, sawApd, sawIDNA bool
	for _, p := range pkgs {
		if p.Error != nil {
			t.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		switch {
		case p.ImportPath == self:
			sawSelf = true
			continue
		case p.Standard:
			continue
		case p.ImportPath == "github.com/cockroachdb/apd/v3":
			sawApd = true
		case p.ImportPath == "golang.org/x/net/idna":
			sawIDNA = true
		}
		if i := slices.IndexFunc(forbiddenInPolicy, func(bad string) bool { return strings.HasPrefix(p.ImportPath, bad) }); i >= 0 {
			t.Errorf("policy depends on %s: the pure core must not reach %s", p.ImportPath, strings.TrimSuffix(forbiddenInPolicy[i], "/"))
		} else if !policyMayImport(p.ImportPath) {
			t.Errorf("policy depends on %s, which is neither the standard library nor apd or IDNA", p.ImportPath)
		}
	}
	// If go list stopped reporting what it should, the loop above would
	// pass vacuously.
	if !sawSelf || !sawApd || !sawIDNA {
		t.Errorf("go list -deps did not list policy (%v), apd (%v) and idna (%v)", sawSelf, sawApd, sawIDNA)
	}
}

// policyMayImport and the forbidden list must actually refuse what the
// architecture forbids.
func TestPolicyDependencyRuleRefuses(t *testing.T) {
	for _, p := range []string{
		modulePath + "/actors", modulePath + "/transport", modulePath + "/persistence",
		"go.etcd.io/bbolt", "github.com/valyala/fasthttp", "github.com/asynkron/protoactor-go/actor",
		"golang.org/x/net/http2", "github.com/cockroachdb/apd",
	} {
		if policyMayImport(p) {
			t.Errorf("the rule lets policy import %s", p)
		}
	}
}

func TestTransportDoesNotImportBbolt(t *testing.T) {
	pkgs := goList(t, "./transport/...")
	var sawTransport bool
	for _, p := range pkgs {
		if p.ImportPath == modulePath+"/transport" {
			sawTransport = true
			if !slices.Contains(p.Imports, modulePath+"/actors") && !slices.Contains(p.Imports, modulePath+"/policy") {
				t.Errorf("transport imports neither actors nor policy: %v; is go list seeing the package?", p.Imports)
			}
		}
		for _, imp := range p.Imports {
			if imp == "go.etcd.io/bbolt" || strings.HasPrefix(imp, "go.etcd.io/bbolt/") {
				t.Errorf("%s imports %s: transport talks to actors, never to storage", p.ImportPath, imp)
			}
		}
	}
	if !sawTransport {
		t.Error("go list did not report package transport")
	}
}

func TestActorsDoNotImportFasthttp(t *testing.T) {
	pkgs := goList(t, "-deps", "./actors")
	var sawActors bool
	for _, p := range pkgs {
		if p.ImportPath == modulePath+"/actors" {
			sawActors = true
		}
		if p.ImportPath == "github.com/valyala/fasthttp" || strings.HasPrefix(p.ImportPath, "github.com/valyala/fasthttp/") ||
			strings.HasPrefix(p.ImportPath, "github.com/fasthttp/") {
			t.Errorf("actors depend on %s: HTTP belongs to transport", p.ImportPath)
		}
		if p.ImportPath == modulePath+"/transport" || strings.HasPrefix(p.ImportPath, modulePath+"/transport/") {
			t.Errorf("actors depend on %s: the dependency runs from transport to actors", p.ImportPath)
		}
	}
	if !sawActors {
		t.Error("go list did not report package actors")
	}
}
