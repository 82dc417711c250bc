// Package rcu expedites the kernel's RCU grace periods while many TCP-AO
// keys leave established sockets at once (kernel.expedite_rcu).
//
// Each TCP_AO_DEL_KEY on an established socket waits for an RCU grace
// period (synchronize_rcu): about 12 ms in the emulated guest, longer on
// a busy host. A speaker that deletes its keys one after another in one
// thread (BIRD, at a configure that drops a key from a route server's
// thousand sessions) waits a thousand of them in a row: over 12 s, past
// its control socket's answer and its peers' hold timers. With
// /sys/kernel/rcu_expedited at 1 every grace period is expedited
// (synchronize_rcu_expedited: interrupts to every CPU instead of waiting
// for each to pass a quiescent state), well under a millisecond each.
// It is a system-wide knob, so aokeyd sets it only for the length of such
// a batch and puts back what it found.
//
// What survives a crash: before writing 1 the value found is recorded in
// a file of aokeyd's state directory; a hold's release writes it back and
// removes the record, and Open (at aokeyd's start) puts back a value a
// crash left recorded. A knob found at 1 already (the operator's) is
// never touched.
package rcu

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/aokeyd/aokeyd/internal/durable"
)

// SysfsPath is the kernel's knob.
const SysfsPath = "/sys/kernel/rcu_expedited"

// RecordName is the record's file name in aokeyd's state directory.
const RecordName = "rcu-expedited-before"

// maxRecord caps the record's size (a decimal value and a newline).
const maxRecord = 64

// Expediter holds /sys/kernel/rcu_expedited at 1 while any Hold is
// outstanding. A nil *Expediter holds nothing (the setting is off).
type Expediter struct {
	knob, record string
	log          *slog.Logger

	mu    sync.Mutex
	holds int
	// before is the value found when the first hold set the knob; set:
	// this Expediter wrote 1 (and must put before back).
	before string
	set    bool
	// failed is the last error logged, so a failing knob is logged once.
	failed string
}

// Open returns the Expediter of knob (SysfsPath in production) whose
// record is the file record, putting back a value a crash left recorded.
// An error reading or writing the knob is not Open's: it is logged at
// the first hold, and holds then do nothing.
func Open(knob, record string, log *slog.Logger) (*Expediter, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Expediter{knob: knob, record: record, log: log}
	b, err := durable.Read(record, maxRecord)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return e, nil
	case err != nil:
		return nil, fmt.Errorf("%s: %w (remove it; then check %s, which aokeyd may have left at 1)", record, err, knob)
	}
	before, ok := parseValue(b)
	if !ok {
		return nil, fmt.Errorf("%s: not a value of %s (remove it; then check %s, which aokeyd may have left at 1)", record, knob, knob)
	}
	if err := writeKnob(knob, before); err != nil {
		return nil, fmt.Errorf("putting back %s=%s, as aokeyd found it before a stop it did not finish: %w", knob, before, err)
	}
	if err := os.Remove(record); err != nil {
		return nil, err
	}
	log.Info("rcu_expedited put back as found before aokeyd's last stop, which did not finish a batch", "knob", knob, "value", before)
	return e, nil
}

// Hold expedites RCU grace periods until the returned release is called
// (each once). Holds nest: the knob goes back when the last is released.
func (e *Expediter) Hold() (release func()) {
	if e == nil {
		return func() {}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.holds++
	if e.holds == 1 {
		e.expedite()
	}
	var once sync.Once
	return func() { once.Do(e.release) }
}

func (e *Expediter) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.holds--
	if e.holds > 0 || !e.set {
		return
	}
	e.set = false
	if err := writeKnob(e.knob, e.before); err != nil {
		// The record stays: the next start puts the value back.
		e.logOnce("could not put back rcu_expedited: aokeyd's next start puts it back", err)
		return
	}
	if err := os.Remove(e.record); err != nil && !errors.Is(err, fs.ErrNotExist) {
		e.logOnce("could not remove the rcu_expedited record", err)
	}
}

// expedite sets the knob to 1 unless it is 1 already, recording the value
// found first; e.mu is held.
func (e *Expediter) expedite() {
	b, err := os.ReadFile(e.knob)
	if err != nil {
		e.logOnce("kernel.expedite_rcu: cannot read rcu_expedited: grace periods are not expedited", err)
		return
	}
	before, ok := parseValue(b)
	if !ok {
		e.logOnce("kernel.expedite_rcu: rcu_expedited holds no value", fmt.Errorf("%q", strings.TrimSpace(string(b))))
		return
	}
	if before != "0" {
		return // expedited already (the operator's): never touched
	}
	if err := durable.Write(e.record, []byte(before+"\n"), 0o600); err != nil && !durable.Replaced(err) {
		e.logOnce("kernel.expedite_rcu: cannot record rcu_expedited's value: grace periods are not expedited", err)
		return
	}
	if err := writeKnob(e.knob, "1"); err != nil {
		os.Remove(e.record)
		e.logOnce("kernel.expedite_rcu: cannot write rcu_expedited (aokeyd needs root for it): grace periods are not expedited", err)
		return
	}
	e.before, e.set, e.failed = before, true, ""
}

func (e *Expediter) logOnce(msg string, err error) {
	if err.Error() == e.failed {
		return
	}
	e.failed = err.Error()
	e.log.Warn(msg, "knob", e.knob, "err", err)
}

// parseValue is the knob's value in b: a non-negative decimal.
func parseValue(b []byte) (string, bool) {
	s := strings.TrimSpace(string(b))
	if _, err := strconv.ParseUint(s, 10, 31); err != nil {
		return "", false
	}
	return s, true
}

// writeKnob writes v to the knob (never through a symlink).
func writeKnob(knob, v string) error {
	f, err := os.OpenFile(knob, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v + "\n")
	return errors.Join(err, f.Close())
}
