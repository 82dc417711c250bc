/* mutant edit_applied: new material under A's IDs replaces A on the listener at once, while the established socket keeps A (the behaviour before edits were held back).
 * make model checks that it violates a property. */
#define MUTANT_EDIT_APPLIED
#include "roll.pml"
