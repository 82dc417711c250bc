/* mutant lifetime_drops_listener: a listener sync holds the desired keys only, so a key past its lifetime leaves the listener although the session still carries it (the behaviour before the never-strand rule).
 * make model checks that it violates a property. */
#define MUTANT_LIFETIME_DROPS_LISTENER
#include "roll.pml"
