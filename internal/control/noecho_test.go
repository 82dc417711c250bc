package control

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// noechoValue is a test secret (keystore/testdata/test-secrets.txt): what
// an operator might paste into aoctl's peer or vrf argument by mistake.
const noechoValue = "aokeyd-test-secret-delta-2Lr"

// TestTargetNotEchoed: a request whose peer is not an IP address, or whose
// vrf is not a VRF name, is refused with 400 before the backend sees it,
// and neither the answer nor the audit and failure log lines show the
// value; they say what it is not. A value that parses is shown. The value
// used to go into the audit line as it was, and the backends' errors
// (peer "X" is not an IP address) into the answer and the log.
func TestTargetNotEchoed(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		want             string // in the answer when refused; "" when accepted
		show             []string
	}{
		{"rotate peer", "/v1/rotate", `{"peer":"V"}`, "peer is not an IP address", nil},
		{"rotate vrf", "/v1/rotate", `{"peer":"192.0.2.2","vrf":"V"}`, "vrf is not a VRF name", nil},
		{"rotate vrf with a space", "/v1/rotate", `{"peer":"192.0.2.2","vrf":"red V"}`, "vrf is not a VRF name", nil},
		{"revoke peer", "/v1/revoke", `{"chain":"core","key":"a","peer":"V"}`, "peer is not an IP address", nil},
		{"adopt peer", "/v1/adopt", `{"peer":"V"}`, "peer is not an IP address", nil},
		{"migrate peer", "/v1/migrate", `{"peer":"V"}`, "peer is not an IP address", nil},
		{"unknown request field", "/v1/rotate", `{"all":true,"V":1}`, "unknown field", nil},
		{"status peer", "GET /v1/status?peer=V", "", "peer is not an IP address", nil},
		{"status peer with a bad vrf", "GET /v1/status?peer=192.0.2.2+vrf+V", "", "vrf is not a VRF name", nil},
		{"status peer with a vrf", "GET /v1/status?peer=192.0.2.2+vrf+red", "", "", nil},
		{"status interface neighbour", "GET /v1/status?peer=swp1", "", "", nil},
		{"status interface neighbour with a vrf", "GET /v1/status?peer=swp1+vrf+red", "", "", nil},
		{"status interface neighbour's key", "GET /v1/status?peer=swp1+interface+vrf+red", "", "", nil},
		{"status interface neighbour with a bad vrf", "GET /v1/status?peer=swp1+vrf+V", "", "vrf is not a VRF name", nil},
		{"valid peer and vrf", "/v1/rotate", `{"peer":"2001:db8::2","vrf":"vrf-blue"}`, "", []string{"peer=2001:db8::2", "vrf=vrf-blue"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			fb := &fakeBackend{}
			c, _ := serve(t, ServerOptions{Backend: fb, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			var code int
			var eb ErrorBody
			if get, ok := strings.CutPrefix(tc.path, "GET "); ok {
				code, eb = getRaw(t, c, strings.NewReplacer("=V", "="+noechoValue, "+V", "+"+noechoValue).Replace(get))
			} else {
				code, eb = postRaw(t, c, tc.path, strings.ReplaceAll(tc.body, "V", noechoValue))
			}
			calls := len(fb.revokes) + len(fb.rotates) // status calls are not counted: its refusals are 400s
			text := eb.Error + "\n" + logs.String()
			if strings.Contains(text, noechoValue) || strings.Contains(text, noechoValue[:16]) {
				t.Errorf("the answer or the log shows the value: %q", strings.ReplaceAll(text, noechoValue, "<V>"))
			}
			if tc.want == "" {
				if code == http.StatusBadRequest { // the fake backend knows no peer: 404 for status
					t.Errorf("answer %d %+v, want it accepted", code, eb)
				}
			} else if code != http.StatusBadRequest || eb.Code != CodeInvalid || calls != 0 || !strings.Contains(eb.Error, tc.want) {
				t.Errorf("answer %d %+v, %d backend calls; want 400 %q saying %q and none", code, eb, calls, CodeInvalid, tc.want)
			}
			for _, s := range tc.show {
				if !strings.Contains(logs.String(), s) {
					t.Errorf("the audit line does not show %s:\n%s", s, logs.String())
				}
			}
		})
	}
}

// getRaw gets path and returns the status and, for an error, the error body.
func getRaw(t *testing.T, c *Client, path string) (int, ErrorBody) {
	t.Helper()
	resp, err := c.hc.Get("http://aokeyd" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb ErrorBody
	if resp.StatusCode != http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
			t.Fatalf("error body: %v", err)
		}
	}
	return resp.StatusCode, eb
}
