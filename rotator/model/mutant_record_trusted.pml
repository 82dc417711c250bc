/* mutant record_trusted: after a restart a listener sync keeps what the carried-keys record says instead of waiting until the session was read; with the record always up to date that is safe until a restart loses it, when a key the session still uses leaves the listener (issue 47: why the start-up gate holds even with a record).
 * make model checks that it violates a property. */
#define MUTANT_RECORD_TRUSTED
#include "roll.pml"
