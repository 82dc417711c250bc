/* mutant edit_counters_only: an edit in place replaces A wherever A's pkt_good is zero, although A is Current_key or RNext_key (a session that sends with A, or asks the peer for it, then signs with A', which the peer drops).
 * make model checks that it violates a property. */
#define MUTANT_EDIT_COUNTERS_ONLY
#include "roll.pml"
