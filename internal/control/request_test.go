package control

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A request body is exactly one JSON value: anything after it but white
// space (a second object, garbage, a body over MaxBody) is refused with 400
// and nothing is executed; it used to run the first object and drop the
// rest.
func TestStrictRequestBody(t *testing.T) {
	const revokeA, revokeB = `{"chain":"core","key":"a"}`, `{"chain":"core","key":"b"}`
	tests := []struct {
		name, path, body string
		ok               bool
	}{
		{"one object", "/v1/revoke", revokeA, true},
		{"trailing white space", "/v1/revoke", revokeA + "\n \t\r\n", true},
		{"second object", "/v1/revoke", revokeA + revokeB, false},
		{"second object on its own line", "/v1/revoke", revokeA + "\n" + revokeB + "\n", false},
		{"trailing garbage", "/v1/revoke", revokeA + " x", false},
		{"trailing bracket", "/v1/revoke", revokeA + "]", false},
		{"trailing null", "/v1/revoke", revokeA + " null", false},
		{"second object past MaxBody", "/v1/revoke", revokeA + strings.Repeat(" ", MaxBody) + revokeB, false},
		{"rotate, second object", "/v1/rotate", `{"all":true}{"peer":"192.0.2.2"}`, false},
		{"rotate, one object", "/v1/rotate", `{"all":true}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fb := &fakeBackend{}
			c, _ := serve(t, ServerOptions{Backend: fb})
			code, eb := postRaw(t, c, tt.path, tt.body)
			calls := len(fb.revokes) + len(fb.rotates)
			if tt.ok {
				if code != http.StatusOK || calls != 1 {
					t.Errorf("answer %d %+v, %d backend calls; want 200 and 1 call", code, eb, calls)
				}
				return
			}
			if code != http.StatusBadRequest || eb.Code != CodeInvalid {
				t.Errorf("answer %d %+v, want 400 %q", code, eb, CodeInvalid)
			}
			if calls != 0 {
				t.Errorf("a refused body reached the backend: revokes %+v rotates %+v", fb.revokes, fb.rotates)
			}
		})
	}
}

// readJSON's refusals wrap ErrInvalid (400) and name their cause.
func TestReadJSONErrors(t *testing.T) {
	const obj = `{"chain":"core","key":"a"}`
	tests := []struct {
		name, body string
		want       error // nil: decoded
	}{
		{"one object", obj, nil},
		{"white space", " " + obj + "\n\n", nil},
		{"second object", obj + obj, errTrailingData},
		{"empty object after", obj + "{}", errTrailingData},
		{"garbage after", obj + "x", errTrailingData},
		{"closing bracket after", obj + "]", errTrailingData},
		{"string after", obj + ` "k"`, errTrailingData},
		{"value over MaxBody", `{"chain":"` + strings.Repeat("a", MaxBody) + `"}`, errBodyTooLarge},
		{"white space over MaxBody", obj + strings.Repeat(" ", MaxBody), errBodyTooLarge},
		{"unknown field", `{"chain":"core","key":"a","secret":"x"}`, ErrInvalid},
		{"empty", "", ErrInvalid},
		{"truncated", obj[:10], ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req RevokeRequest
			err := readJSON(httptest.NewRequest(http.MethodPost, "/v1/revoke", strings.NewReader(tt.body)), &req)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("readJSON: %v", err)
			case tt.want == nil && (req.Chain != "core" || req.Key != "a"):
				t.Errorf("decoded %+v", req)
			case tt.want != nil && (!errors.Is(err, ErrInvalid) || !errors.Is(err, tt.want)):
				t.Errorf("readJSON: %v, want %v wrapping ErrInvalid", err, tt.want)
			}
		})
	}
}

// postRaw posts body as it is (Client marshals its own) and returns the
// status and, for an error, the error body.
func postRaw(t *testing.T, c *Client, path, body string) (int, ErrorBody) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://aokeyd"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb ErrorBody
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &eb); err != nil {
			t.Fatalf("error answer %d is not an ErrorBody: %q", resp.StatusCode, b)
		}
	}
	return resp.StatusCode, eb
}
