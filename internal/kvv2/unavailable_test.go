package kvv2

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/vault/api"
)

// Unavailable turns exactly the errors of a sealed Vault and of one that
// gave no answer into an UnavailableError (which still unwraps to Vault's
// own error), and leaves every other error as it was.
func TestUnavailableClassifies(t *testing.T) {
	const u = "http://10.0.0.1:8200/v1/secret/data/f/revocations?version=2"
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	noHost := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "vault.invalid"}}
	for _, tc := range []struct {
		name   string
		err    error
		want   string // "": left as it was
		sealed bool
	}{
		{"Sealed", &api.ResponseError{StatusCode: 503, URL: u, Errors: []string{"Vault is sealed"}}, "vault at http://10.0.0.1:8200 is sealed: read P not done; unseal it (vault operator unseal)", true},
		{"SealedLogin", fmt.Errorf("vault: approle login: %w", &api.ResponseError{StatusCode: 503, URL: u, Errors: []string{"Vault is sealed"}}), "is sealed", true},
		{"Refused", &url.Error{Op: "Get", URL: u, Err: refused}, "vault at http://10.0.0.1:8200 does not answer (connection refused): read P not done; start Vault, or check its address", false},
		{"Cut", fmt.Errorf("vault: read: %w", &url.Error{Op: "Get", URL: u, Err: io.EOF}), "(connection cut before an answer)", false},
		{"Timeout", &url.Error{Op: "Get", URL: u, Err: context.DeadlineExceeded}, "vault at http://10.0.0.1:8200 gave no answer in time: read P not done; check Vault's load", false},
		{"TimeoutNoURL", fmt.Errorf("vault: read P: %w", context.DeadlineExceeded), "vault at http://10.0.0.2:8200 gave no answer in time", false},
		{"Canceled", fmt.Errorf("vault: read P: %w", context.Canceled), "", false},
		{"NoHost", &url.Error{Op: "Get", URL: u, Err: noHost}, "(cannot connect: lookup vault.invalid: no such host)", false},
		{"Standby503", &api.ResponseError{StatusCode: 503, URL: u, Errors: []string{"node is standby"}}, "", false},
		{"Denied", &api.ResponseError{StatusCode: 403, URL: u, Errors: []string{"permission denied"}}, "", false},
		{"ServerError", &api.ResponseError{StatusCode: 500, URL: u, Errors: []string{"internal error"}}, "", false},
		{"TLS", &url.Error{Op: "Get", URL: u, Err: x509.UnknownAuthorityError{}}, "", false},
		{"Other", errors.New("fleet: encode"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Unavailable("read", "P", "http://10.0.0.2:8200", tc.err)
			var ue *UnavailableError
			if tc.want == "" {
				if got != tc.err {
					t.Errorf("%v became %v, want it left as it was", tc.err, got)
				}
				return
			}
			if !errors.As(got, &ue) || ue.Sealed != tc.sealed || !strings.Contains(got.Error(), tc.want) {
				t.Fatalf("%v: got %v; want an UnavailableError (sealed %t) saying %q", tc.err, got, tc.sealed, tc.want)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("%v does not unwrap to Vault's error", got)
			}
			if strings.Contains(got.Error(), "version=2") || strings.Contains(got.Error(), "\n") {
				t.Errorf("%q: want one line with no query", got)
			}
		})
	}
	if Unavailable("read", "P", "http://10.0.0.2:8200", nil) != nil {
		t.Error("nil became an error")
	}
	late := fmt.Errorf("vault: read P: %w", context.DeadlineExceeded)
	if got := Unavailable("read", "P", "", late); got != late {
		t.Errorf("a bare deadline with no address known became %v", got)
	}
}
