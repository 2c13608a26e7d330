package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestAccessLogLinesAreKeptInOrder: the access log is written in batches
// (see serve), and no line of it is lost or moved: every request's line
// is written, before the lines logged after it, by the time the server
// has stopped.
func TestAccessLogLinesAreKeptInOrder(t *testing.T) {
	srv := serveInBackground(t, "-addr", "127.0.0.1:0", "-data", t.TempDir())
	defer srv.stop()
	addr := srv.waitForLog(regexp.MustCompile(`msg=serving addr=(127\.0\.0\.1:\d+)`))[1]
	const n = 25
	for i := range n {
		// A request without a key: answered 401, logged at info level.
		resp, err := http.Get(fmt.Sprintf("http://%s/v1/spends/spd_%032x", addr, i))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET without a key: %d, want 401", resp.StatusCode)
		}
	}
	srv.stop()
	log := srv.errOut.String()
	lines := strings.Split(log, "\n")
	var access []int
	stopping := -1
	for i, l := range lines {
		switch {
		case strings.Contains(l, "msg=request ") && strings.Contains(l, "route=/v1/spends/{id} status=401"):
			access = append(access, i)
		case strings.Contains(l, "msg=\"stopping:"):
			stopping = i
		}
	}
	if len(access) != n {
		t.Fatalf("%d access lines for %d requests:\n%s", len(access), n, log)
	}
	if stopping < 0 || access[n-1] > stopping {
		t.Fatalf("the access lines are not all before the stop's line:\n%s", log)
	}
	if !strings.Contains(lines[len(lines)-2], "msg=stopped") {
		t.Fatalf("the last line is not the stop's:\n%s", log)
	}
}
