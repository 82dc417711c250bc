// Package kvv2 names what Vault's KV version 2 engine answers aokeyd's
// reads and writes with when there is nothing to serve: a path whose
// current version was deleted or destroyed (GoneError), and a Vault that
// is sealed or gives no answer (UnavailableError). The key source
// (keystore) and the fleet store (internal/fleet) both read Vault; each
// error here is one type for both, naming the path, the Vault and the
// operator's fix.
package kvv2

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"syscall"

	"github.com/hashicorp/vault/api"
)

// UnavailableError is a request Vault could not serve at all: Vault
// is sealed (503 "Vault is sealed"), or it gave no answer (connection
// refused, reset or cut, no answer in time). Nothing was read or written:
// what is in Vault is as it was, and a reader keeps what it read last.
// It names the Vault and what to do; it unwraps to Vault's own error.
type UnavailableError struct {
	Op     string // "read", "write", "list", "read metadata"
	Path   string // the KV API path, e.g. secret/data/aokeyd/fleet/revocations
	Vault  string // scheme://host[:port] of the Vault asked
	Sealed bool
	// Late: Vault did not answer within the request's time (up but slow,
	// or the way to it is); otherwise it refused or cut the connection.
	Late bool
	// Why is the failure without Vault's URL, for a Vault that did not
	// answer ("" when sealed).
	Why string
	Err error
}

// errSealed is Vault's whole answer for a sealed Vault, with 503 (its
// sdk/helper/consts.ErrSealed): compared whole, never searched for.
const errSealed = "Vault is sealed"

// whyLate is UnavailableError.Why of a Vault that gave no answer within
// the request's time: up, but slow, or the way to it is.
const whyLate = "no answer in time"

func (e *UnavailableError) Error() string {
	switch {
	case e.Sealed:
		return fmt.Sprintf("vault at %s is sealed: %s %s not done; unseal it (vault operator unseal)", e.Vault, e.Op, e.Path)
	case e.Late:
		return fmt.Sprintf("vault at %s gave %s: %s %s not done; check Vault's load and the network to it", e.Vault, whyLate, e.Op, e.Path)
	}
	return fmt.Sprintf("vault at %s does not answer (%s): %s %s not done; start Vault, or check its address (VAULT_ADDR, key_source.vault.address)",
		e.Vault, e.Why, e.Op, e.Path)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Unavailable is err as an *UnavailableError when it says that Vault was
// sealed or gave no answer, else err itself (nil stays nil). Any other
// answer of Vault's (403, 500, 503 of a standby) and a TLS error are not
// one: Vault is up, and their own error says what is wrong. addr is the
// client's Vault address, for an error that carries no URL (a request's
// time running out before Vault answered: the client returns the bare
// context error); "" when unknown.
func Unavailable(op, p, addr string, err error) error {
	if err == nil {
		return nil
	}
	var re *api.ResponseError
	if errors.As(err, &re) {
		if re.StatusCode == http.StatusServiceUnavailable && slices.Contains(re.Errors, errSealed) {
			return &UnavailableError{Op: op, Path: p, Vault: origin(re.URL), Sealed: true, Err: err}
		}
		return err
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		if addr != "" && errors.Is(err, context.DeadlineExceeded) {
			return &UnavailableError{Op: op, Path: p, Vault: origin(addr), Late: true, Why: whyLate, Err: err}
		}
		return err
	}
	why := noAnswer(ue)
	if why == "" {
		return err
	}
	return &UnavailableError{Op: op, Path: p, Vault: origin(ue.URL), Late: why == whyLate, Why: why, Err: err}
}

// noAnswer says how a request got no answer from Vault ("" when it is not
// that).
func noAnswer(ue *url.Error) string {
	var op *net.OpError
	switch {
	case errors.Is(ue.Err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(ue.Err, io.EOF), errors.Is(ue.Err, io.ErrUnexpectedEOF), errors.Is(ue.Err, syscall.ECONNRESET),
		errors.Is(ue.Err, io.ErrClosedPipe), errors.Is(ue.Err, net.ErrClosed):
		return "connection cut before an answer"
	case ue.Timeout(), errors.Is(ue.Err, context.DeadlineExceeded):
		return whyLate
	case errors.As(ue.Err, &op) && op.Op == "dial":
		return "cannot connect: " + op.Err.Error()
	}
	return ""
}

// origin is a URL's scheme and host (no path, query or user info).
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unknown address)"
	}
	return u.Scheme + "://" + u.Host
}
