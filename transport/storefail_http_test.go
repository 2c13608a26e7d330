package transport_test

import (
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/agentpay/guard/internal/guardtest"
)

// TestSpendWhileJournalFails: while the journal cannot commit, a payment
// is answered 503 with Retry-After and leaves nothing behind; once the
// journal works again, the same Idempotency-Key and body create the
// payment, and the service goes on settling others.
func TestSpendWhileJournalFails(t *testing.T) {
	var failing atomic.Bool
	errDisk := errors.New("injected: the disk refuses the write")
	e := start(t, guardtest.WithCommitFault(func(int) error {
		if failing.Load() {
			return errDisk
		}
		return nil
	}))
	s := e.srv
	// One settled payment first, so the list has something to compare.
	created(t, s, e.agentKey, spendBody("1.00", "api.vendor.com", "/first"))
	last := newest(t, s, e.agentKey, "/v1/spends")
	count := spendCount(t, s, e.agentID)
	before := balance(t, s, e.agentKey)

	key := newKey()
	body := spendBody("2.00", "api.vendor.com", "/report")
	failing.Store(true)
	r := spend(t, s, e.agentKey, key, body)
	wantError(t, r, http.StatusServiceUnavailable, "api_error", "service_unavailable", "")
	if n, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("503 Retry-After %q, want a number of seconds", r.Header.Get("Retry-After"))
	}
	failing.Store(false)

	// Nothing of the failed request is visible.
	if got := newest(t, s, e.agentKey, "/v1/spends"); got != last {
		t.Errorf("after a failed commit the newest spend is %s, want %s", got, last)
	}
	if n := spendCount(t, s, e.agentID); n != count {
		t.Errorf("after a failed commit the journal holds %d spends, want %d", n, count)
	}
	if after := balance(t, s, e.agentKey); !reflect.DeepEqual(after, before) {
		t.Errorf("a failed commit changed the balance:\n before %v\n after  %v", before, after)
	}

	// The same key and body, with the journal working: a new payment.
	r = spend(t, s, e.agentKey, key, body)
	mustStatus(t, r, http.StatusCreated)
	checkSpend(t, r)
	if r.Body["idempotent_replay"] != false || r.Body["status"] != "settled" {
		t.Errorf("retry after the failure: replay %v, status %v; want a new settled spend: %s", r.Body["idempotent_replay"], r.Body["status"], r.Raw)
	}
	if got := newest(t, s, e.agentKey, "/v1/spends"); got != r.Body["id"] {
		t.Errorf("newest spend %s, want the retried one %v", got, r.Body["id"])
	}
	// And the service keeps working: another payment settles.
	next := created(t, s, e.agentKey, spendBody("3.00", "api.vendor.com", "/next"))
	if next["status"] != "settled" {
		t.Errorf("the next spend is %v, want settled", next["status"])
	}
	if n := spendCount(t, s, e.agentID); n != count+2 {
		t.Errorf("%d spends stored, want %d", n, count+2)
	}
}
