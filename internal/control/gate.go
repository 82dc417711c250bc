package control

import "fmt"

// StartUpGate says that the start-up gate holds: after a start, until the
// speaker's sessions are listed and each one up has been read from the
// kernel, the listener sync deletes no key but a revoked one (what the
// sessions carry is not known yet). aoctl plan shows the deletes it holds
// back.
type StartUpGate struct {
	// Listed: the speaker's sessions have been listed since the start.
	Listed bool `json:"listed"`
	// Unread is how many sessions up were not read yet.
	Unread int `json:"unread"`
}

// Text is the gate for people, as aoctl status shows it.
func (g StartUpGate) Text() string {
	if !g.Listed {
		return "listener deletes held: the speaker's sessions are not listed yet since the start"
	}
	return fmt.Sprintf("listener deletes held: %d sessions up not read yet since the start", g.Unread)
}
