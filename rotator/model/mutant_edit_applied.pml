/* mutant edit_applied: new material under A's IDs replaces A on every socket at once, whatever A authenticated (the behaviour before edits were held back: a session using A, and the peer's reconnect signed with it, fail against A').
 * make model checks that it violates a property. */
#define MUTANT_EDIT_APPLIED
#include "roll.pml"
