package webhook_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agentpay/guard/transport/webhook"
)

// The vector was computed independently (Python's hmac module):
// hmac.new(secret, b"1790000000." + body, sha256).hexdigest().
const (
	vectorBody = `{"id":"evt_0123456789abcdef0123456789abcdef","object":"event","type":"webhook.test"}`
	vectorT    = 1790000000
	vectorNew  = "01f25bc189ef6a5750b4bc4794fd4ac02b2fff8ef78d62b1ca22e6908c28d55f"
	vectorOld  = "fc928b145fe97ae45e488db1bbf44f89a56cf114dafdff67b362a59a7f0a26ab"
)

func TestSignFixedVector(t *testing.T) {
	if got := webhook.Sign("whsec_test_secret", vectorT, []byte(vectorBody)); got != vectorNew {
		t.Fatalf("Sign = %s, want %s", got, vectorNew)
	}
	h := webhook.SignatureHeader(vectorT, []byte(vectorBody), "whsec_test_secret", "whsec_old_secret")
	if want := "t=1790000000,v1=" + vectorNew + ",v1=" + vectorOld; h != want {
		t.Fatalf("header\n%s\nwant\n%s", h, want)
	}
}

func TestVerify(t *testing.T) {
	at := time.Unix(vectorT, 0)
	both := "t=1790000000,v1=" + vectorNew + ",v1=" + vectorOld
	for _, tc := range []struct {
		name   string
		header string
		body   string
		secret string
		now    time.Time
		want   error
	}{
		{"current secret", both, vectorBody, "whsec_test_secret", at, nil},
		{"previous secret during rotation", both, vectorBody, "whsec_old_secret", at, nil},
		{"spaces after commas", "t=1790000000, v1=" + vectorNew, vectorBody, "whsec_test_secret", at, nil},
		{"within tolerance", both, vectorBody, "whsec_test_secret", at.Add(299 * time.Second), nil},
		{"too old", both, vectorBody, "whsec_test_secret", at.Add(301 * time.Second), webhook.ErrTooOld},
		{"from the future", both, vectorBody, "whsec_test_secret", at.Add(-301 * time.Second), webhook.ErrTooOld},
		{"other secret", both, vectorBody, "whsec_other", at, webhook.ErrNoMatch},
		{"body changed", both, vectorBody + " ", "whsec_test_secret", at, webhook.ErrNoMatch},
		{"t changed", "t=1790000001,v1=" + vectorNew, vectorBody, "whsec_test_secret", at, webhook.ErrNoMatch},
		{"no t", "v1=" + vectorNew, vectorBody, "whsec_test_secret", at, webhook.ErrMalformed},
		{"no v1", "t=1790000000", vectorBody, "whsec_test_secret", at, webhook.ErrMalformed},
		{"two t", "t=1,t=1790000000,v1=" + vectorNew, vectorBody, "whsec_test_secret", at, webhook.ErrMalformed},
		{"garbage", "nonsense", vectorBody, "whsec_test_secret", at, webhook.ErrMalformed},
		{"unknown scheme only", "t=1790000000,v0=" + vectorNew, vectorBody, "whsec_test_secret", at, webhook.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := webhook.Verify(tc.header, []byte(tc.body), tc.secret, tc.now, webhook.Tolerance)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}
