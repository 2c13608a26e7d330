package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPaths are where Debian (and a few other systems) put chromium.
var chromiumPaths = []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"}

// browser is the one browser of this test binary; nil when there is none.
var browser context.Context

// skipReason says why the browser tests do not run here.
var skipReason string

// axeSource is axe-core's script, injected into each page checked.
var axeSource string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ci := os.Getenv("CI") != ""
	path := findChromium()
	axe, axeErr := os.ReadFile(filepath.Join("node_modules", "axe-core", "axe.min.js"))
	switch {
	case path == "" && ci:
		fmt.Fprintln(os.Stderr, "browsertest: CI is set but chromium is not installed (apt-get install chromium)")
		return 1
	case axeErr != nil && ci:
		fmt.Fprintf(os.Stderr, "browsertest: CI is set but axe-core is missing (npm ci in transport/console/browsertest): %v\n", axeErr)
		return 1
	case path == "":
		skipReason = "chromium is not installed (apt-get install chromium); set CI=1 to make this a failure"
		return m.Run()
	case axeErr != nil:
		skipReason = "axe-core is not installed (npm ci in transport/console/browsertest); set CI=1 to make this a failure"
		return m.Run()
	}
	axeSource = string(axe)
	profile, err := os.MkdirTemp("", "guard-chromium-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "browsertest:", err)
		return 1
	}
	defer os.RemoveAll(profile)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	// Start the browser now, so a broken installation fails once, here.
	if err := chromedp.Do(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "browsertest: starting chromium:", err)
		return 1
	}
	browser = ctx
	return m.Run()
}

func findChromium() string {
	if p := os.Getenv("GUARD_CHROMIUM"); p != "" {
		return p
	}
	for _, p := range chromiumPaths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

// tab opens a tab in a browser context of its own for the test.
func tab(t *testing.T) context.Context {
	t.Helper()
	if browser == nil {
		t.Skip(skipReason)
	}
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelTimeout)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	return ctx
}

// do runs browser steps, failing the test with what was on the page.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("%s: %v\nat %s:\n%s", what, err, loc, text)
	}
}

// mainText is the text of the page's main region.
func mainText(t *testing.T, ctx context.Context) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("main") ? document.querySelector("main").innerText : document.body.innerText`))
	if err != nil {
		t.Fatalf("reading the page: %v", err)
	}
	return s
}

// violation is one axe-core finding.
type violation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// checkAccessibility runs axe-core on the current page and fails the test
// on any serious or critical violation.
func checkAccessibility(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](axeSource+";true")); err != nil {
		t.Fatalf("%s: injecting axe-core: %v", page, err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then(r =>
		JSON.stringify(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.map(n => n.target.join(" "))}))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: running axe-core: %v", page, err)
	}
	var vs []violation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatalf("%s: axe-core answered %q: %v", page, out, err)
	}
	for _, v := range vs {
		if v.Impact == "serious" || v.Impact == "critical" {
			t.Errorf("%s: accessibility (%s) %s: %s at %s", page, v.Impact, v.ID, v.Help, strings.Join(v.Nodes, ", "))
		} else {
			t.Logf("%s: accessibility (%s) %s: %s", page, v.Impact, v.ID, v.Help)
		}
	}
}

// artifacts is the directory screenshots are written to.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GUARD_TEST_ARTIFACTS")
	if dir == "" {
		abs, err := filepath.Abs(filepath.Join("..", "..", "..", "test-artifacts"))
		if err != nil {
			t.Fatal(err)
		}
		dir = abs
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves a PNG of the element sel (or the whole page when sel
// is empty) as name in the artifacts directory.
func screenshot(t *testing.T, ctx context.Context, sel, name string) {
	t.Helper()
	var png []byte
	var err error
	if sel == "" {
		png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	} else {
		png, err = chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	}
	if err == nil && len(png) == 0 {
		err = errors.New("empty image")
	}
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(artifacts(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
