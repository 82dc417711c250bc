package control

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Cred is a connected process's credentials (SO_PEERCRED).
type Cred struct {
	PID int32
	UID uint32
	GID uint32
}

type credKey struct{}

type credResult struct {
	cred Cred
	err  error
}

// connContext stores the connection's peer credentials in its context.
func connContext(ctx context.Context, c net.Conn) context.Context {
	cred, err := peerCred(c)
	return context.WithValue(ctx, credKey{}, credResult{cred, err})
}

// WithCred returns ctx carrying cred as the peer's credentials, for serving
// Handler on something other than Serve's unix listener (tests, in-process
// callers that are trusted).
func WithCred(ctx context.Context, cred Cred) context.Context {
	return context.WithValue(ctx, credKey{}, credResult{cred: cred})
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

// procGroups reads a process's supplementary groups from /proc/<pid>/status.
func procGroups(pid int32) ([]uint32, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Groups:")
		if !ok {
			continue
		}
		var gs []uint32
		for _, g := range strings.Fields(rest) {
			n, err := strconv.ParseUint(g, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("/proc/%d/status: group %q: %w", pid, g, err)
			}
			gs = append(gs, uint32(n))
		}
		return gs, nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("/proc/%d/status: no Groups line", pid)
}
