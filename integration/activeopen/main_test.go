//go:build linux

package activeopen

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/connectguard"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Roles of the test binary (os.Args[1]):
//
//	ao-launch SOCK PROGRAM ARGS...   connectguard.Launch (the tiny parent)
//	ao-supervisor SOCK KEYFILE       a supervisor with keys from a key file
func TestMain(m *testing.M) {
	connectguard.RunChildIfRequested()
	if len(os.Args) > 2 {
		switch os.Args[1] {
		case "ao-launch":
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			err := connectguard.Launch(os.Args[3:], connectguard.LaunchOptions{SocketPath: os.Args[2], Logger: log})
			fmt.Fprintln(os.Stderr, "launch:", err)
			os.Exit(125)
		case "ao-supervisor":
			os.Exit(supervise(os.Args[2], os.Args[3]))
		}
	}
	os.Exit(m.Run())
}

func supervise(sock, keyFile string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx := context.Background()
	src, err := keystore.NewFile(keystore.FileOptions{Path: keyFile})
	if err != nil {
		log.Error("key source", "err", err)
		return 1
	}
	snap, err := src.Read(ctx)
	if err != nil {
		log.Error("key source", "err", err)
		return 1
	}
	var l connectguard.Listener
	// The launcher may not be listening yet.
	err = lab.Poll{What: "the launcher's listener", Timeout: 30 * time.Second, Every: 100 * time.Millisecond}.Wait(ctx, func() (bool, string, error) {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var ferr error
		l, ferr = connectguard.Fetch(fctx, sock)
		return ferr == nil, fmt.Sprint(ferr), nil
	})
	if err != nil {
		log.Error("fetch", "err", err)
		return 1
	}
	fmt.Printf("supervising pid %d\n", l.PID)
	keys := func(pid int, dst netip.AddrPort) ([]tcpao.Key, uint8, uint8, bool) {
		return keysFor(snap, dst.Addr(), time.Now())
	}
	s := connectguard.NewSupervisor(l.FD, keys, connectguard.SupervisorOptions{
		PID: l.PID, Logger: log,
		Observe: func(e connectguard.Event) {
			log.Info("notification", "tid", e.TID, "pid", e.PID, "dst", e.Dst, "outcome", e.Outcome.String(), "keys", e.Keys, "err", e.Err, "took", e.Took)
		},
	})
	err = s.Run(ctx)
	log.Info("supervisor stopped", "err", err)
	return 0
}

// keysFor is the policy of this test: every non-revoked MKT whose chain
// lists a prefix containing peer, for that prefix; Current_key and
// RNext_key are the first key usable for sending.
func keysFor(snap *keystore.Snapshot, peer netip.Addr, now time.Time) (keys []tcpao.Key, current, rnext uint8, ok bool) {
	for _, cn := range snap.ChainNames() {
		for _, m := range snap.Chains[cn].Keys {
			for _, p := range m.Peers {
				if !p.Contains(peer) || m.Revoked {
					continue
				}
				if !ok && m.ActiveSend(now) {
					current, rnext, ok = m.SendID, m.RecvID, true
				}
				keys = append(keys, m.Key(p, 0))
			}
		}
	}
	if !ok {
		for _, k := range keys {
			k.Secret.Zero()
		}
		return nil, 0, 0, false
	}
	return keys, current, rnext, true
}
