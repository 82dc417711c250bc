package control

import (
	"context"
	"errors"
)

// Cred is a connected process's credentials (SO_PEERCRED) and its
// supplementary groups (SO_PEERGROUPS), both as of its connect().
type Cred struct {
	PID    int32
	UID    uint32
	GID    uint32
	Groups []uint32
}

type credKey struct{}

type credResult struct {
	cred Cred
	err  error
}

func credFrom(ctx context.Context) (Cred, error) {
	r, ok := ctx.Value(credKey{}).(credResult)
	if !ok {
		return Cred{UID: ^uint32(0), GID: ^uint32(0)}, errors.New("no peer credentials (not a unix socket connection)")
	}
	if r.err != nil {
		return Cred{UID: ^uint32(0), GID: ^uint32(0)}, r.err
	}
	return r.cred, nil
}
