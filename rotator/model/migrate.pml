/*
 * migrate.pml: the TCP-MD5 to TCP-AO migration of internal/migrate and
 * internal/daemon/migrate.go, for the side that accepts the peer's
 * connection (aokeyd on the speaker's listener), with the far end
 * switching at any moment or never, and checked by integration/tools/
 * model.sh (make model) beside roll.pml.
 *
 * Abstraction:
 *  - The listener holds the peer's TCP-MD5 key (lmd5) and/or its TCP-AO
 *    key at the migration's covering prefix (lao). The kernel takes the
 *    covering TCP-AO key beside the MD5 key and refuses an MD5 key while
 *    TCP-AO covers the peer (tcpao's md5/ conformance cases).
 *  - The far end signs with one kind (far): TCP-MD5 until it switches
 *    (once, at any moment, or never); a switch drops the session (BIRD
 *    restarts the protocol), and the far end reconnects with its kind.
 *  - The session (sess): none, on TCP-MD5 or on TCP-AO; a session on
 *    TCP-AO that verified segments is what the daemon observes (aosess).
 *  - The daemon: the record's step (prepared, switching, done,
 *    rolled-back), advanced once per pass ("EV advance") only while the
 *    key source reads (src); the listener sync ("EV lsync") brings the
 *    listener one change at a time to the record's desired state (TCP-AO
 *    in prepared, switching and done unless revoked; TCP-MD5 until done):
 *    a crash between any two steps loses nothing (the record is durable,
 *    the kernel holds its keys, the next pass recomputes).
 *  - Faults: the key source fails and recovers; the deadline passes
 *    (a clock event, once); an operator revokes the TCP-AO key during the
 *    migration (removed even in use).
 * Properties (assertions, in every state):
 *  - never unauthenticated: the listener always holds a key for the peer
 *    (an unsigned SYN from it is never taken), a revoke of the TCP-AO
 *    key during the migration included;
 *  - the TCP-MD5 key leaves the listener only once a session ran TCP-AO
 *    (carried): before that an MD5 far end always gets back in;
 *  - after a roll-back the listener takes TCP-MD5.
 * No roll starts on a TCP-MD5 session by construction: the daemon runs no
 * rotation machine on a socket without TCP-AO (md5Session).
 */

mtype:mstep = { mnone, prepared, switching, done, rolledback };
mtype:kind = { knone, kmd5, kao };

bool lmd5 = true, lao = false;
mtype:kind far = kmd5, sess = kmd5;
mtype:mstep step = mnone;
bool aosess = false, src = true, deadline = false, revoked = false, rolled = false;
bool carried = false; /* a session ran TCP-AO (history) */

/* connect: the far end's SYN with its kind; taken when the listener holds it. */
inline connect() {
	if
	:: far == kmd5 && lmd5 -> sess = kmd5
	:: far == kao && lao -> sess = kao
	:: else -> sess = knone
	fi
}

active proctype world() {
	do
	/* the operator starts the migration (again after a roll-back) */
	:: atomic { (step == mnone || step == rolledback) && !rolled -> printf("EV migrate\n"); step = prepared }
	/* the far end switches to TCP-AO at any moment, once; its session restarts */
	:: atomic { far == kmd5 && step != mnone -> printf("EV farswitch\n"); far = kao; sess = knone; aosess = false; connect() }
	/* the session drops and the far end reconnects */
	:: atomic { sess != knone -> printf("EV drop\n"); sess = knone; aosess = false; connect() }
	:: atomic { sess == knone -> printf("EV reconnect\n"); connect() }
	/* a session on TCP-AO verifies segments (keepalives) */
	:: atomic { sess == kao && !aosess -> printf("EV aogood\n"); aosess = true; carried = true }
	/* the key source fails, and reads again */
	:: atomic { src -> printf("EV srcdown\n"); src = false }
	:: atomic { !src -> printf("EV srcup\n"); src = true }
	/* the switch time, then the deadline, pass */
	:: atomic { step == prepared && src -> printf("EV advance switching\n"); step = switching }
	:: atomic { !deadline && (step == prepared || step == switching) -> printf("EV deadline\n"); deadline = true }
	/* an operator revokes the TCP-AO key during the migration */
	:: atomic { !revoked && (step == prepared || step == switching) -> printf("EV revoke\n"); revoked = true }
	/* the pass: the migration's step (a revoked TCP-AO key rolls it back) */
	:: atomic { src && (step == prepared || step == switching) && !revoked && aosess && sess == kao -> printf("EV advance done\n"); step = done }
	:: atomic { src && (step == prepared || step == switching) && (revoked || deadline && !(aosess && sess == kao)) ->
		printf("EV advance rolledback\n"); step = rolledback; rolled = true }
	/* the listener sync, one kernel change a step */
	:: atomic { (step == prepared || step == switching || step == done) && !revoked && !lao -> printf("EV lsync addao\n"); lao = true }
	:: atomic { lao && (revoked || step == rolledback || step == mnone) -> printf("EV lsync delao\n"); lao = false;
		if :: sess == kao -> sess = knone; aosess = false :: else fi /* a revoke removes it in use */ }
#ifdef MUTANT_MD5_EARLY
	/* the mutant: TCP-MD5 leaves at the switch time, not once TCP-AO carried a session */
	:: atomic { lmd5 && (step == switching || step == done) -> printf("EV lsync delmd5\n"); lmd5 = false }
#else
	/* rotator.PlanMD5: retired only where TCP-AO covers the peer */
	:: atomic { lmd5 && step == done && lao -> printf("EV lsync delmd5\n"); lmd5 = false }
#endif
	:: atomic { !lmd5 && step != done && !lao -> printf("EV lsync addmd5\n"); lmd5 = true }
	od
}

/* the invariants, checked in every state */
active proctype monitor() {
	do
	:: assert(lmd5 || lao);
	   assert(lmd5 || carried);
	   assert(step != rolledback || lmd5)
	od
}
