package actors

import (
	"strings"
	"testing"
)

func TestParseSecretShape(t *testing.T) {
	body := strings.Repeat("aZ9", 14) + "x" // 43 base62 characters
	tests := []struct {
		secret string
		env    Env
		kind   string
		ok     bool
	}{
		{"svc_test_agent_" + body, EnvTest, KindAgent, true},
		{"svc_live_owner_" + body, EnvLive, KindOwner, true},
		{"svc_live_agent_" + body, EnvLive, KindAgent, true},
		{"svc_test_owner_" + body, EnvTest, KindOwner, true},
		{"svc_test_agent_" + body[:42], "", "", false},       // one short
		{"svc_test_agent_" + body + "a", "", "", false},      // one long
		{"svc_test_agent_" + body[:42] + "-", "", "", false}, // not base62
		{"svc_prod_agent_" + body, "", "", false},
		{"svc_test_admin_" + body, "", "", false},
		{"svc_testagent_" + body, "", "", false},
		{"svc_test_agent" + body, "", "", false},
		{"SVC_test_agent_" + body, "", "", false},
		{"svc_", "", "", false},
		{"svc_test_", "", "", false},
		{"svc_test_agent_", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		for _, form := range []string{"text", "bytes"} {
			var env Env
			var kind string
			var ok bool
			if form == "text" {
				env, kind, ok = parseSecret(tt.secret)
			} else {
				env, kind, ok = parseSecret([]byte(tt.secret))
			}
			if env != tt.env || kind != tt.kind || ok != tt.ok {
				t.Errorf("parseSecret(%s %q) = %q, %q, %v; want %q, %q, %v",
					form, tt.secret, env, kind, ok, tt.env, tt.kind, tt.ok)
			}
		}
	}
}
