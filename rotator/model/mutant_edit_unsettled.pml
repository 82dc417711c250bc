/* mutant edit_unsettled: a session takes an edit in place as soon as A is neither Current_key nor RNext_key and its pkt_good is zero, before the peer was seen to choose Current_key since aokeyd last set it (after aokeyd's own switch, the peer's RNext may still name A: Current_key then follows it to A', which the peer drops).
 * make model checks that it violates a property. */
#define MUTANT_EDIT_UNSETTLED
#include "roll.pml"
