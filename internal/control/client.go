package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// DefaultSocket is where the daemon listens unless configured otherwise.
const DefaultSocket = "/run/aokeyd/control.sock"

// Client talks to the daemon over its control socket.
type Client struct {
	socket string
	hc     *http.Client
}

// NewClient returns a client for the socket at path. timeout bounds each
// request (0: none; revokes and rotations may take a while).
func NewClient(path string, timeout time.Duration) *Client {
	d := net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		},
		DisableKeepAlives: true,
	}
	return &Client{socket: path, hc: &http.Client{Transport: tr, Timeout: timeout}}
}

// Socket is the path the client dials.
func (c *Client) Socket() string { return c.socket }

// Health is GET /v1/health.
func (c *Client) Health(ctx context.Context) (HealthReport, error) {
	var r HealthReport
	return r, c.do(ctx, http.MethodGet, "/v1/health", nil, &r)
}

// Status is GET /v1/status; peer "" asks for every peer.
func (c *Client) Status(ctx context.Context, peer string) (StatusReport, error) {
	p := "/v1/status"
	if peer != "" {
		p += "?" + url.Values{"peer": {peer}}.Encode()
	}
	var r StatusReport
	return r, c.do(ctx, http.MethodGet, p, nil, &r)
}

// Plan is GET /v1/plan.
func (c *Client) Plan(ctx context.Context) (PlanReport, error) {
	var r PlanReport
	return r, c.do(ctx, http.MethodGet, "/v1/plan", nil, &r)
}

// Rotate is POST /v1/rotate.
func (c *Client) Rotate(ctx context.Context, req RotateRequest) (RotateResult, error) {
	var r RotateResult
	return r, c.do(ctx, http.MethodPost, "/v1/rotate", req, &r)
}

// Revoke is POST /v1/revoke.
func (c *Client) Revoke(ctx context.Context, req RevokeRequest) (RevokeResult, error) {
	var r RevokeResult
	return r, c.do(ctx, http.MethodPost, "/v1/revoke", req, &r)
}

// Replace is POST /v1/replace.
func (c *Client) Replace(ctx context.Context, req ReplaceRequest) (ReplaceResult, error) {
	var r ReplaceResult
	return r, c.do(ctx, http.MethodPost, "/v1/replace", req, &r)
}

// Migrate is POST /v1/migrate.
func (c *Client) Migrate(ctx context.Context, req MigrateRequest) (MigrateResult, error) {
	var r MigrateResult
	return r, c.do(ctx, http.MethodPost, "/v1/migrate", req, &r)
}

// Adopt is POST /v1/adopt.
func (c *Client) Adopt(ctx context.Context, req AdoptRequest) (AdoptResult, error) {
	var r AdoptResult
	return r, c.do(ctx, http.MethodPost, "/v1/adopt", req, &r)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("control: encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://aokeyd"+path, body)
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreachable, c.socket, unwrapURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%w: %s: read answer: %v", ErrUnreachable, c.socket, err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb ErrorBody
		msg := http.StatusText(resp.StatusCode)
		if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
			msg = eb.Error
		}
		return &APIError{Status: resp.StatusCode, Msg: msg}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: malformed answer to %s %s: %v", ErrServer, method, path, err)
	}
	return nil
}

func unwrapURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// APIError is an error answer from the daemon. It wraps the sentinel of its
// status (ErrNotFound, ErrInvalid, ErrRefused, ErrServer).
type APIError struct {
	Status int
	Msg    string
}

func (e *APIError) Error() string { return e.Msg }

// Unwrap returns the status's sentinel.
func (e *APIError) Unwrap() error { return sentinelOf(e.Status) }
