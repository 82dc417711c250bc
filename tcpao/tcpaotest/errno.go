package tcpaotest

import (
	"errors"

	"github.com/aokeyd/aokeyd/tcpao/tcpaotest/internal/errno"
)

// The Linux errno values of the model: one list, shared with the
// conformance table (internal/errno).
const (
	eNOENT       = errno.ENOENT
	eBADF        = errno.EBADF
	eNOMEM       = errno.ENOMEM
	eBUSY        = errno.EBUSY
	eEXIST       = errno.EEXIST
	eINVAL       = errno.EINVAL
	eMSGSIZE     = errno.EMSGSIZE
	eAFNOSUPPORT = errno.EAFNOSUPPORT
	eISCONN      = errno.EISCONN
	eKEYREJECTED = errno.EKEYREJECTED
)

// ErrTimeout is what Connect and Exchange return when the real kernel would
// drop the segments: the connection never establishes, the data never
// arrives.
var ErrTimeout = errors.New("tcpaotest: timed out: the peer dropped the segments")
