/* mutant retire_in_use: the planner deletes a stale key that is still Current_key (the peer's RNext keeps it) instead of deferring it.
 * make model checks that it violates a property. */
#define MUTANT_RETIRE_IN_USE
#include "roll.pml"
