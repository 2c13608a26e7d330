package metrics

import (
	"net/http"
	"net/http/httptest"
)

func serveStatus(h http.Handler, path string) int { return serveMethod(h, http.MethodGet, path) }

func serveMethod(h http.Handler, method, path string) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Code
}
