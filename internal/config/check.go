package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/tcpao"
)

// DefaultHorizon is how far ahead Check looks for key-coverage gaps.
const DefaultHorizon = 90 * 24 * time.Hour

// CheckOptions configure Check.
type CheckOptions struct {
	// Now is the instant the policy is validated at; zero means time.Now().
	Now time.Time
	// Horizon is how far ahead gaps are looked for; 0 means DefaultHorizon.
	Horizon time.Duration
	// SkipKeySource checks config and policy only (no key file or Vault
	// read, hence no policy-versus-keys checks).
	SkipKeySource bool
	// VRFDevice says whether a policy binding's vrf: is a VRF device here
	// (LocalVRF); nil skips the check (validating for another machine).
	VRFDevice func(vrf string) error
	// ReadTimeout bounds the key source's read, Vault included
	// (ReadKeySource); 0 leaves it to the source's own timeouts.
	ReadTimeout time.Duration
	// Algorithms asks this machine's kernel which TCP-AO algorithms it
	// accepts (tcpao.ProbeAlgorithms, and the kernel's release for the
	// problem's words): a key of one it refuses is a problem. nil skips
	// the check (validating for another machine, or a kernel that could
	// not be asked).
	Algorithms func() (map[tcpao.Algorithm]error, string)
	Logger     *slog.Logger
}

// Checked is the outcome of Check: what loaded, and every problem found.
type Checked struct {
	Config *Config
	Policy *policy.Policy
	// Snapshot is the key source's snapshot, owned by the caller, who
	// zeroes it (Zero is safe on nil).
	Snapshot *keystore.Snapshot
	// Problems are the errors found, in order: config, control group,
	// policy, key source read, rejected MKTs, policy versus keys, keys of
	// an algorithm the kernel refuses. Each one names its file and line
	// where it has them.
	Problems []error
	// Unanswered are the Problems that say a Vault key source gave no
	// answer to check: it could not be reached, was sealed, did not let
	// aokeyd in, timed out, or the credential files it is read with are
	// not there (yet). aoctl validate refuses them like any problem;
	// aokeyd's start and reload do not (Refused): at boot Vault may come
	// up after aokeyd, and the speakers' sockets must not stay unkeyed
	// meanwhile. Whatever a key source does answer is never here: a file
	// source always answers, and so does a Vault that returns keys.
	Unanswered []error
	// Warnings are what the checks pass but the operator must hear of,
	// each named like a problem: a binding's vrf: that is no VRF device
	// here (CheckOptions.VRFDevice), keys whose material is a public demo
	// key (keystore.ErrDemoKey). They refuse nothing.
	Warnings []error
}

// OK reports whether no problem was found.
func (c *Checked) OK() bool { return len(c.Problems) == 0 }

// Refused are the problems aokeyd's start and reload refuse: every one
// of Problems but the Unanswered, in the same order. The Unanswered are
// always Problems' last: Check stops at them.
func (c *Checked) Refused() []error {
	return c.Problems[:len(c.Problems)-len(c.Unanswered)]
}

// Refusal is nil when nothing is Refused, and otherwise the error that
// refuses a start: every refused problem, one a line, each in the words
// `aoctl validate` prints it (its Error()). aokeyd's start and aoctl
// validate read the same Problems of the same Check, so neither can accept
// what the other refuses, nor word it differently; the one difference is
// a Vault that gave no answer (Unanswered), which the start waits for.
func (c *Checked) Refusal() error {
	ps := c.Refused()
	if len(ps) == 0 {
		return nil
	}
	return &refusal{ps}
}

type refusal struct{ problems []error }

func (r *refusal) Error() string {
	var b strings.Builder
	noun := "problems"
	if len(r.problems) == 1 {
		noun = "problem"
	}
	fmt.Fprintf(&b, "refusing to start: %d %s (aoctl validate lists the same):", len(r.problems), noun)
	for _, p := range r.problems {
		b.WriteString("\n")
		b.WriteString(p.Error())
	}
	return b.String()
}

func (r *refusal) Unwrap() []error { return r.problems }

// Check runs the checks the daemon runs at start and on reload: parse the
// config, resolve the control group, load the policy, check the bindings
// and the keys against what the speaker's kind can hold (its registry
// entry: VRF twins, prefixes, VRFs, TCP options, MAC lengths), read the
// key source, validate the policy against the keys over the horizon, and
// ask the kernel about the keys' algorithms. It stops early only when a
// later step cannot run (no config, no policy, no keys).
//
// aokeyd's start runs it, key source included, and refuses every problem
// but a Vault's that gave no answer (Refusal) before it writes anything;
// a reload refuses the same (Refused). Every check of the configuration,
// the policy and the keys belongs here, and nowhere else: that is what
// makes `aoctl validate` and aokeyd refuse the same files, in the same
// words. A Vault that gives no answer at boot (down, sealed) is waited
// for (keystore.Cache), not a reason to stay down: its problem is in
// Unanswered too.
func Check(ctx context.Context, path string, o CheckOptions) *Checked {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Horizon == 0 {
		o.Horizon = DefaultHorizon
	}
	out := &Checked{}
	c, err := Load(path)
	if err != nil {
		out.Problems = append(out.Problems, flatten(err)...)
		return out
	}
	out.Config = c
	if _, _, err := c.ControlGroupID(); err != nil {
		out.Problems = append(out.Problems, err)
	}
	if _, _, err := c.ControlAdminGroupID(); err != nil {
		out.Problems = append(out.Problems, err)
	}
	pol, err := c.LoadPolicy()
	if err != nil {
		ps := c.placed("policy.path", err)
		for _, p := range ps {
			var fe *keystore.FieldError
			if errors.As(p, &fe) && errors.Is(fe, policy.ErrUnreadable) {
				fe.Hint = "correct policy.path in " + c.name() + ", or write the policy there"
			}
		}
		out.Problems = append(out.Problems, ps...)
		return out
	}
	out.Policy = pol
	kind := c.SpeakerKind()
	out.Problems = append(out.Problems, pol.CheckSpeaker(kind.Kind, kinds())...)
	if o.VRFDevice != nil {
		out.Warnings = append(out.Warnings, pol.CheckVRFDevices(o.VRFDevice)...)
	}
	if o.SkipKeySource {
		return out
	}
	if ps := c.credentialFileProblems(); len(ps) > 0 {
		// Vault Agent may not have written them yet at boot.
		out.unanswered(ps...)
		return out
	}
	src, err := c.OpenKeySource(SourceOptions{Logger: o.Logger, Now: func() time.Time { return o.Now }})
	if err != nil {
		out.Problems = append(out.Problems, c.placed(c.sourceField(), err)...)
		return out
	}
	defer src.Close()
	snap, err := ReadKeySource(ctx, src, o.ReadTimeout)
	if err != nil {
		ps := c.sourceProblems(err)
		if c.KeySource.Type == SourceVault && !answered(err) {
			out.unanswered(ps...)
		} else {
			out.Problems = append(out.Problems, ps...)
		}
		return out
	}
	out.Snapshot = snap
	out.Problems = append(out.Problems, snap.Rejected()...)
	out.Warnings = append(out.Warnings, snap.DemoKeys()...)
	for _, p := range pol.Validate(snap, o.Now, o.Horizon) {
		if errors.Is(p, policy.ErrGapAhead) { // valid today: warned of, never refused
			out.Warnings = append(out.Warnings, p)
			continue
		}
		out.Problems = append(out.Problems, p)
	}
	out.Problems = append(out.Problems, pol.CheckSpeakerKeys(kind.Kind, snap, o.Now)...)
	if o.Algorithms != nil {
		// Every key's algorithm, as aokeyd would install it here.
		algs, kernel := o.Algorithms()
		out.Problems = append(out.Problems, snap.RefusedAlgorithms(algs, kernel)...)
	}
	return out
}

// unanswered records ps as problems of a key source that gave no answer.
func (c *Checked) unanswered(ps ...error) {
	c.Problems = append(c.Problems, ps...)
	c.Unanswered = append(c.Unanswered, ps...)
}

// answered reports whether a failed key source read failed on what the
// source answered: a problem placed in what it returned (a chain that
// does not decode, no chains at the prefix) is a *keystore.FieldError;
// every other error (a connection refused, Vault sealed, 403, a timeout)
// is the source not answering.
func answered(err error) bool {
	var fe *keystore.FieldError
	return errors.As(err, &fe)
}

// credentialFileProblems are the Vault credential files (auth.token_file,
// role_id_file, secret_id_file) that cannot be read, each named by its
// field and never by its path: a token pasted where the path goes would
// otherwise be printed back in the open error. Checked only when the key
// source is read: at boot, Vault Agent may not have written them yet.
func (c *Config) credentialFileProblems() []error {
	v := c.KeySource.Vault
	if c.KeySource.Type != SourceVault || v == nil {
		return nil
	}
	var out []error
	for _, f := range []struct{ field, path string }{
		{"key_source.vault.auth.token_file", v.Auth.TokenFile},
		{"key_source.vault.auth.role_id_file", v.Auth.RoleIDFile},
		{"key_source.vault.auth.secret_id_file", v.Auth.SecretIDFile},
	} {
		if f.path == "" {
			continue
		}
		fh, err := os.Open(f.path)
		if err == nil {
			fh.Close()
			continue
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is the config's value
		}
		out = append(out, c.problem(f.field, fmt.Errorf("%w: the file cannot be opened (%v): name the file that holds the credential, not the credential", keystore.ErrInvalid, err)))
	}
	return out
}

// sourceField is the config's field that names the key source: what a
// problem of reading it that names no file of its own is placed at.
func (c *Config) sourceField() string {
	if c.KeySource.Type == SourceVault {
		return "key_source.vault"
	}
	return "key_source.file.path"
}

// sourceProblems are the problems of a failed key source read: the key
// file's own, a mode that exposes it with the setting that accepts it,
// anything else at the config's key source.
func (c *Config) sourceProblems(err error) []error {
	ps := c.placed(c.sourceField(), err)
	for _, p := range ps {
		var fe *keystore.FieldError
		switch {
		case !errors.As(p, &fe):
		case errors.Is(fe, keystore.ErrInsecureFile):
			fe.Hint = c.insecureHint(fe.File)
		case errors.Is(fe, keystore.ErrUnreadable) && errors.Is(fe, fs.ErrNotExist):
			fe.Hint = "correct key_source.file.path in " + c.name() + ", or write the key file there"
		}
	}
	return ps
}

// flatten splits a keystore.FieldErrors (what Parse and policy.Parse
// return) into one error per problem.
func flatten(err error) []error {
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		return m.Unwrap()
	}
	var ps keystore.FieldErrors
	if errors.As(err, &ps) {
		return ps.Unwrap()
	}
	return []error{err}
}
