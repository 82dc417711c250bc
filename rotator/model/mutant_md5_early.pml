/* mutant md5_early: the TCP-MD5 key leaves the listener at the switch time, before TCP-AO carried a session.
 * make model checks that it violates a property. */
#define MUTANT_MD5_EARLY
#include "migrate.pml"
