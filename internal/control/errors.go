package control

import (
	"errors"
	"net/http"
)

// Sentinel errors. A Backend wraps ErrNotFound or ErrInvalid to choose the
// status code; Client errors wrap the sentinel of the status it got.
var (
	// ErrNotFound: no such peer, chain or key (404).
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request is malformed or not allowed (400).
	ErrInvalid = errors.New("invalid request")
	// ErrRefused: the caller's uid may not use the control socket (403).
	ErrRefused = errors.New("permission denied")
	// ErrUnreachable: the control socket cannot be reached (daemon down,
	// wrong path, socket file permissions).
	ErrUnreachable = errors.New("daemon unreachable")
	// ErrServer: the daemon failed to answer (500 or a malformed answer).
	ErrServer = errors.New("daemon error")
)

// Error codes in error bodies.
const (
	CodeNotFound = "not_found"
	CodeInvalid  = "invalid"
	CodeRefused  = "refused"
	CodeInternal = "internal"
)

// ErrorBody is the JSON body of every error answer.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func statusOf(err error) (int, string) {
	switch {
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest, CodeInvalid
	case errors.Is(err, ErrRefused):
		return http.StatusForbidden, CodeRefused
	}
	return http.StatusInternalServerError, CodeInternal
}

func sentinelOf(status int) error {
	switch status {
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusBadRequest:
		return ErrInvalid
	case http.StatusForbidden:
		return ErrRefused
	}
	return ErrServer
}
