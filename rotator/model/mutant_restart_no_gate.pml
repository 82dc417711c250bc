/* mutant restart_no_gate: after a restart a listener sync runs before the session was read, knowing of no key it carries, so a key past its lifetime that the session still uses leaves the listener (issue 47: the behaviour before the start-up gate).
 * make model checks that it violates a property. */
#define MUTANT_RESTART_NO_GATE
#include "roll.pml"
