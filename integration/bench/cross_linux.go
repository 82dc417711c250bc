//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package bench

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// crossRun separates who built a listener's key list from who rotates it
// (item 2c): the raw loop rotates a list aokeyd's SyncListener installed,
// and SyncListener rotates a list the raw loop installed, each in the
// kernel's list order (newest installed retired first), each on a fresh
// listener. Item 2 compares aokeyd on its own list with the raw loop on
// its own; a gap that follows the list, not the rotator, is in how the
// list was built.
func (r *runner) crossRun(ctx context.Context, n int, s *Size) error {
	opts := rotator.ListenerOptions{PeersPerBatch: r.cfg.PeersPerBatch, OptMemMax: func() (int, error) { return r.limit, nil }}

	// The raw loop rotates aokeyd's install.
	l, err := listen(ctx)
	if err != nil {
		return err
	}
	d, err := r.desired(n, 1)
	if err != nil {
		l.close()
		return err
	}
	_, err = rotator.SyncListener(l.sock, d, opts)
	zeroDesired(d)
	if err != nil {
		l.close()
		return fmt.Errorf("bench: cross: aokeyd install N=%d: %w", n, err)
	}
	keys, err := l.sock.Keys(tcpao.KeyFilter{})
	if err != nil {
		l.close()
		return fmt.Errorf("bench: cross: list: %w", err)
	}
	headA := head(keys)
	listed := make([]netip.Prefix, len(keys)) // the kernel's order: newest installed first
	for i, k := range keys {
		listed[i] = k.Peer
	}
	steps, err := r.rawSteps(nil, listed, 1, 2)
	if err != nil {
		l.close()
		return err
	}
	settle(n)
	t, err := r.raw(l, steps)
	if err == nil {
		err = verify(l, n, 2, "cross: raw rotation of aokeyd's install")
	}
	l.close()
	if err != nil {
		return err
	}
	s.CrossRawOnAokeyd, s.CrossRawOnAokeydSys = append(s.CrossRawOnAokeyd, t.el), append(s.CrossRawOnAokeydSys, t.sys)
	r.log.Info("cross: raw rotation of aokeyd's install", "n", n, "took", time.Duration(t.el), "sys", time.Duration(t.sys), "list_head", headA)

	// SyncListener rotates the raw loop's install.
	settle(n)
	if l, err = listen(ctx); err != nil {
		return err
	}
	defer l.close()
	if steps, err = r.rawSteps(steps[:0], peersUp(n), 0, 1); err != nil {
		return err
	}
	if _, err := r.raw(l, steps); err != nil {
		return fmt.Errorf("bench: cross: raw install N=%d: %w", n, err)
	}
	if keys, err = l.sock.Keys(tcpao.KeyFilter{}); err != nil {
		return fmt.Errorf("bench: cross: list: %w", err)
	}
	headR := head(keys)
	if d, err = r.desired(n, 2); err != nil {
		return err
	}
	settle(n)
	t, err = r.syncTimed(l, d, opts)
	zeroDesired(d)
	if err != nil {
		return fmt.Errorf("bench: cross: aokeyd rotation of the raw install N=%d: %w", n, err)
	}
	if err := verify(l, n, 2, "cross: aokeyd rotation of the raw install"); err != nil {
		return err
	}
	s.CrossAokeydOnRaw, s.CrossAokeydOnRawSys = append(s.CrossAokeydOnRaw, t.el), append(s.CrossAokeydOnRawSys, t.sys)
	s.CrossHeads = fmt.Sprintf("aokeyd's install lists %s; the raw loop's %s", headA, headR)
	r.log.Info("cross: aokeyd rotation of the raw install", "n", n, "took", time.Duration(t.el), "sys", time.Duration(t.sys), "list_head", headR)
	return nil
}

// head names the first keys of a listing (the kernel lists newest first).
func head(keys []tcpao.KeyInfo) string {
	var p []string
	for i := 0; i < len(keys) && i < 3; i++ {
		p = append(p, keys[i].Peer.String())
	}
	if len(keys) > 3 {
		p = append(p, "...", keys[len(keys)-1].Peer.String())
	}
	return "[" + strings.Join(p, " ") + "]"
}
