/* mutant exec_retire_unseen: at the executor end (BIRD's file), an old key the peer sent with leaves once its pkt_good stopped rising, before the peer was seen sending with a desired key (planPeer's seenDesired dropped): a peer that never got the new key still sends with the old one between two reads.
 * make model checks that it violates a property. */
#define EXECEND
#define MUTANT_EXEC_RETIRE_UNSEEN
#include "roll.pml"
