package peerconfig

import (
	"fmt"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

const junosDoc = "Junos OS, authentication-key-chains (TCP-AO), https://www.juniper.net/documentation/us/en/software/junos/transport-ip/topics/ref/statement/authentication-tcp-ao-key-chains.html, and Configure a Keychain (TCP-AO), https://www.juniper.net/documentation/en_US/junos/topics/task/configuration/tcp-ao-key-chain.html"

// junosAlgorithm is Junos's ao-attribute cryptographic-algorithm for a,
// "" when Junos has none (Junos OS 20.3R1 and later: HMAC-SHA-1-96 and
// AES-128-CMAC-96 only).
func junosAlgorithm(a tcpao.Algorithm) string {
	switch a {
	case tcpao.HMACSHA1:
		return "hmac-sha-1-96"
	case tcpao.CMACAES128:
		return "aes-128-cmac-96"
	}
	return ""
}

// junosTime is Junos's start-time form, yyyy-mm-dd.hh:mm:ss, which Junos
// reads as UTC.
func junosTime(t time.Time) string {
	if t.IsZero() {
		t = time.Unix(0, 0)
	}
	return t.UTC().Format("2006-01-02.15:04:05")
}

// junos renders `set` commands: the key chain under [edit security
// authentication-key-chains] and the BGP neighbor's use of it. Junos keys
// have a start-time only: the key with the latest start-time that has
// passed is sent with, every configured key is accepted; ends become
// instructions (delete the key once aokeyd no longer accepts it).
func (r *renderer) junos() {
	r.header("#", junosDoc)
	l := r.l
	kc := "set security authentication-key-chains key-chain " + l.Chain
	var lines, notes []string
	add := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	// Always set: without the statement Junos tolerates 3600 s.
	add("%s tolerance %d", kc, int64((l.AcceptTolerance+time.Second-1)/time.Second))
	starts := map[time.Time]string{}
	id := 0
	for _, k := range l.Keys {
		alg := junosAlgorithm(k.Algorithm)
		switch {
		case alg == "":
			r.refuse(k.Name, "Junos TCP-AO offers hmac-sha-1-96 and aes-128-cmac-96 only, not %s", k.Algorithm)
			continue
		case k.MACLen != tcpao.DefaultMACLen:
			r.refuse(k.Name, "Junos TCP-AO MACs are 96 bits (12 bytes); this key's MAC is %d bytes", k.MACLen)
			continue
		case !printable(k.Secret.Bytes()):
			r.refuse(k.Name, "Junos takes the secret as a text string; this key's bytes are not printable ASCII without spaces or quotes")
			continue
		case id > 63:
			r.refuse(k.Name, "a Junos key chain holds at most 64 keys (key 0 through 63)")
			continue
		}
		if other, dup := starts[k.Send.Start]; dup {
			r.refuse(k.Name, "Junos start-times are unique within a key chain; key %s starts sending at the same instant", other)
			continue
		}
		starts[k.Send.Start] = k.Name
		p := fmt.Sprintf("%s key %d", kc, id)
		id++
		// Junos loads any quoted string after `secret` as the secret,
		// spaces and angle brackets included: the placeholder is no
		// `set` command at all, and `load set` refuses an unknown
		// command with a syntax error.
		add("%s", r.notRendered(p+" secret "+r.secret(k, func(b []byte) string { return `"` + string(b) + `"` })))
		add("%s start-time \"%s\"", p, junosTime(k.Send.Start))
		add("%s algorithm ao", p)
		add("%s ao-attribute send-id %d", p, k.SendID)
		add("%s ao-attribute recv-id %d", p, k.RecvID)
		opt := "disabled"
		if k.IncludeTCPOptions {
			opt = "enabled"
		}
		add("%s ao-attribute tcp-ao-option %s", p, opt)
		add("%s ao-attribute cryptographic-algorithm %s", p, alg)
		if k.Send.Start.IsZero() {
			notes = append(notes, fmt.Sprintf("key %s (%s) has no send start: start-time is the Unix epoch", k.Name, p[len(kc)+1:]))
		}
		if end := lastUse(k, l.AcceptTolerance); !end.IsZero() {
			notes = append(notes, fmt.Sprintf("%s: delete key %s (%s): aokeyd accepts it until then (send-lifetime ends %s)",
				fmtTime(end), k.Name, p[len(kc)+1:], endText(k.Send.End)))
		}
	}
	if id == 0 {
		r.refuse("", "Junos can take none of the chain's keys: no key chain or neighbor authentication is rendered (authentication-algorithm ao with no key would drop the session)")
	}
	for _, f := range r.refused {
		if f.Key == "" {
			r.printf("# REFUSED: %s\n", f.Reason)
			continue
		}
		r.printf("# REFUSED key %s: %s\n", f.Key, f.Reason)
	}
	if id == 0 {
		return
	}
	r.placeholderNote("#", "Junos")
	r.printf("# tcp-ao-option is Junos's include-tcp-options; its default is disabled (options excluded), so it is always set.\n")
	r.printf("# start-time is UTC; tolerance is always set (Junos's default is 3600 s).\n")
	if len(notes) > 0 {
		r.printf("# Junos switches keys at start-time and has no end time (RFC 8177 send-lifetime/accept-lifetime end):\n")
		for _, n := range notes {
			r.printf("#   %s\n", n)
		}
	}
	for _, s := range lines {
		r.printf("%s\n", s)
	}
	// A VRF peer: the BGP neighbor in the routing instance of that name
	// (the key chain itself is global).
	bgp := "set protocols bgp"
	if l.VRF != "" {
		bgp = "set routing-instances " + l.VRF + " protocols bgp"
	}
	r.printf("%s group <bgp-group> neighbor %s authentication-algorithm ao\n", bgp, r.local())
	r.printf("%s group <bgp-group> neighbor %s authentication-key-chain %s\n", bgp, r.local(), l.Chain)
}

// lastUse is when aokeyd stops accepting k (its accept end widened by the
// tolerance, or its send end when later); zero when never.
func lastUse(k Key, tol time.Duration) time.Time {
	if k.Accept.End.IsZero() || k.Send.End.IsZero() {
		return time.Time{}
	}
	end := k.Accept.End.Add(tol)
	if k.Send.End.After(end) {
		end = k.Send.End
	}
	return end
}

func endText(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return fmtTime(t)
}
