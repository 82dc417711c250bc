package tcpao

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// ErrAlgorithmRefused: the kernel has TCP-AO but not this algorithm. Its
// TCP_AO_ADD_KEY answers ENOENT when the crypto API has no such hash (a
// kernel built without CONFIG_CRYPTO_CMAC, say; Linux 7.2 and later accept
// only hmac(sha1), hmac(sha256) and cmac(aes128)).
var ErrAlgorithmRefused = errors.New("the kernel refuses this TCP-AO algorithm")

// ProbeAlgorithmsOn asks a kernel which of Algorithms it accepts: for
// each, one TCP_AO_ADD_KEY of a scratch key for peer on a socket that open
// returns (and done releases). The answer maps each algorithm to nil
// (accepted), an error wrapping ErrAlgorithmRefused, or the error that
// kept the kernel from answering for it. The scratch key is all zeros and
// never leaves the scratch socket.
func ProbeAlgorithmsOn(open func() (s Socket, done func(), err error), peer netip.Prefix) map[Algorithm]error {
	out := make(map[Algorithm]error, len(Algorithms))
	for i, a := range Algorithms {
		s, done, err := open()
		if err != nil {
			out[a] = &ProbeError{Err: err}
			continue
		}
		id := uint8(100 + i)
		err = s.AddKey(Key{KeyRef: KeyRef{Peer: peer, SendID: id, RecvID: id}, Algorithm: a, Secret: NewSecret(make([]byte, 16))}, AddOptions{})
		done()
		switch {
		case err == nil:
			out[a] = nil
		case errors.Is(err, syscall.ENOENT):
			out[a] = fmt.Errorf("%w (%w)", ErrAlgorithmRefused, err)
		default:
			out[a] = &ProbeError{Err: err}
		}
	}
	return out
}
