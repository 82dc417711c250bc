/* mutant retire_early: retire the old key right after the switch, without the grace period or the pkt_good check.
 * make model checks that it violates a property. */
#define MUTANT_RETIRE_EARLY
#include "roll.pml"
