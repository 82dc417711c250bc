// Package bird drives BIRD (2.17) through its own interfaces: the control
// socket birdc speaks (Command), its `show protocols all` report
// (ParseProtocols) and the TCP-AO key block of a `protocol bgp`
// (RenderKeys), for aokeyd's native BIRD driver and the scenario tests.
package bird

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// ctlTimeout bounds one command on BIRD's control socket (a configure
// included).
const ctlTimeout = 30 * time.Second

// Command runs one command on BIRD's control socket at sock and returns what
// birdc would print for it (BIRD's greeting first): the socket is birdc's
// own protocol, spoken here without starting a birdc process for every
// look. The socket is a file, reachable from any network namespace.
func Command(sock, command string) (string, error) {
	c, err := net.DialTimeout("unix", sock, ctlTimeout)
	if err != nil {
		return "", fmt.Errorf("bird control socket %s: %w", sock, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(ctlTimeout))
	br := bufio.NewReader(c)
	var out strings.Builder
	if err := readReply(br, &out); err != nil { // "0001 BIRD 2.17 ready."
		return "", fmt.Errorf("bird control socket %s: greeting: %w", sock, err)
	}
	if _, err := io.WriteString(c, command+"\n"); err != nil {
		return "", fmt.Errorf("bird control socket %s: %s: %w", sock, command, err)
	}
	if err := readReply(br, &out); err != nil {
		return out.String(), fmt.Errorf("bird control socket %s: %s: %w", sock, command, err)
	}
	return out.String(), nil
}

// readReply reads one reply of BIRD's control protocol into out, the way
// birdc prints it (client/client.c, server_got_reply): "DDDD-text" and
// "DDDD text" lines print text (nothing for code 0000), " text" lines
// (continuations) print text, anything else "??? <line>"; the line whose
// code is followed by a space ends the reply.
func readReply(r *bufio.Reader, out *strings.Builder) error {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "+"): // asynchronous message
			fmt.Fprintf(out, ">>> %s\n", line[1:])
		case strings.HasPrefix(line, " "):
			out.WriteString(line[1:] + "\n")
		case len(line) > 4 && (line[4] == ' ' || line[4] == '-'):
			code, err := strconv.Atoi(line[:4])
			if err != nil || code < 0 {
				fmt.Fprintf(out, "??? <%s>\n", line)
				continue
			}
			if code != 0 {
				out.WriteString(line[5:] + "\n")
			}
			if line[4] == ' ' {
				return nil
			}
		default:
			fmt.Fprintf(out, "??? <%s>\n", line)
		}
	}
}
