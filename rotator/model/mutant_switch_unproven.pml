/* mutant switch_unproven: switch to the new key before the peer is seen sending with it (await takes no proof).
 * make model checks that it violates a property. */
#define MUTANT_SWITCH_UNPROVEN
#include "roll.pml"
