package daemon

import "syscall"

// errNoEnt is what TCP_AO_GET_KEYS/INFO answer on a socket without TCP-AO.
var errNoEnt = syscall.ENOENT
