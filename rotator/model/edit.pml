/*
 * edit.pml: the edits in place of roll.pml (included by it): the rule
 * that decides, on each socket, whether new material under A's IDs (A')
 * replaces the installed A, its mutants, the invariants that an edit is
 * never half applied, and the witnesses of make model-traces.
 *
 * A on a session authenticated something when it is Current_key or
 * RNext_key or the peer sent with it (ev: its pkt_good above zero): the
 * keys the session carries; and it is held back too until the peer is
 * seen to choose Current_key (cr): aokeyd's own switch moves Current_key
 * off A while the peer's RNext may still name it, and Current_key would
 * follow that RNext to A', whose segments the peer drops. A on a
 * listener authenticated something when it verified a SYN (lg: its
 * pkt_good above zero) or the end's session carries A's IDs, or while
 * what the session carries is not known (the start-up gate, rd). Not
 * modelled: an edit taking effect because the peer is down and its
 * connections fail against A (the model has no down peer, and the peer
 * never holds A'); the planner's property test and host tests check that
 * rule.
 */

/* a revoked key is A's IDs with A's material (A' is another key) */
#define REVS(i, m) (REVOKED(i) && ((m) & KA))

/* An edit in place (PlanSocket, holdEdited): end i's desired A is A'
 * where its socket does not hold it back, A otherwise. On the session A
 * is held back while it authenticated something (SAUTH: the session
 * carries A's IDs), on the listener while it verified a SYN or the
 * session carries A's IDs, or while the start-up gate holds (LAUTH). */
#ifdef MUTANT_EDIT_APPLIED
#define SAUTH(i) 0
#define LAUTH(i) 0
#elif defined(MUTANT_EDIT_COUNTERS_ONLY)
/* mutant: only the pkt_good counters say what authenticated something,
 * not Current_key and RNext_key */
#define SAUTH(i) ((ev[i] & KA) || cr[i] != 3)
#define LAUTH(i) (!rd[i] || lg[i] || (ev[i] & KA))
#elif defined(MUTANT_EDIT_UNSETTLED)
/* mutant: a session's edit goes ahead as soon as A is not carried, before
 * the peer was seen to choose Current_key since aokeyd last set it */
#define SAUTH(i) (CARRIED(i) & KA)
#define LAUTH(i) (!rd[i] || lg[i] || (CARRIED(i) & KA))
#else
#define SAUTH(i) ((CARRIED(i) & KA) || cr[i] != 3)
#define LAUTH(i) (!rd[i] || lg[i] || (CARRIED(i) & KA))
#endif
/* an edit of the session's A is pending: A' desired, A installed */
#define EPEND(i) (ed[i] && (sk[i] & KA))
#define SHOLD(i) (EPEND(i) && SAUTH(i))
#define LHOLD(i) (ed[i] && (ln[i] & KA) && LAUTH(i))
/* end i's desired materials, A' for A unless held back */
#define EDK(i, hold) ((ed[i] && !(hold) && (DK(ph[i]) & KA)) -> ((DK(ph[i]) & ~KA) | KE) : DK(ph[i]))
#define SDK(i) EDK(i, SHOLD(i))
/* What every event leaves true (checked with each state line):
 *  - the kernel's: Current_key and RNext_key name keys the socket holds;
 *  - an edit is never half applied to a key that authenticated
 *    something: A' is on end i's session only while its peer, holding A,
 *    neither sends with A (its Current_key) nor asks for A's IDs (its
 *    RNext_key: end i's Current_key would follow it to A', whose
 *    segments the peer drops); and on end i's listener only while end
 *    i's session holds no A that authenticated something (the peer's
 *    reconnect would be signed with it). */
#define KERNEL_OK(i) ((cur[i] == 0 || KEYOF(i, cur[i]) != 0) && (rnx[i] == 0 || KEYOF(i, rnx[i]) != 0))
#define HALF_S(i) ((sk[i] & KE) && KEYOF(1 - i, KA) == KA && (cur[1 - i] == KA || rnx[1 - i] == KA))
#define HALF_L(i) ((ln[i] & KE) && (sk[i] & KA) && (CARRIED(i) & KA))
#define CHECK assert(KERNEL_OK(0) && KERNEL_OK(1)); assert(!HALF_S(0) && !HALF_S(1)); assert(!HALF_L(0) && !HALF_L(1))
/* make model-traces' witnesses (-DWITNESS=NAME): states the random
 * simulations rarely reach, each replayed against the real machine along
 * the shortest path to it (integration/tools/model-traces.sh). A' taken
 * by a listener, by a session, and (with two reconnects) by the session
 * a later reconnect accepts; A' on a session past A's lifetime (a stale
 * A' to retire). */
#define W_LISTENER_EDIT ((ln[0] | ln[1]) & KE)
#define W_SESSION_EDIT ((sk[0] | sk[1]) & KE)
#define W_ACCEPTED_EDIT (reconnects == 0 && ((sk[0] | sk[1]) & KE))
#define W_STALE_EDIT (((sk[0] & KE) && ph[0] >= 2) || ((sk[1] & KE) && ph[1] >= 2))
#ifdef WITNESS
/* make model-traces: a state to reach; the search that finds it (the
 * assertion) prints the path to it as a trace */
#define WITNESSED assert(!(WITNESS))
#else
#define WITNESSED skip
#endif
/* the machine's read of its socket (a step): counted in cr until the
 * second, the base, while an edit is pending */
inline based(i) {
	if
	:: !EPEND(i) -> cr[i] = 0
	:: EPEND(i) && cr[i] < 2 -> cr[i]++
	:: else -> skip
	fi
}

/* the listener's desired materials: A' for A unless held back; an A' the
 * sync adds replaces A (roll.pml's LNT: whatever else keeps A) */
#define LDK(i) EDK(i, LHOLD(i))

/* Apply's replacement of the installed A by A' (prep: the edit is not
 * held back): delete A, then add A', each a kernel write aokeyd may
 * crash after. Current_key and RNext_key are never A then, but in a
 * mutant: they move to want, as a forced delete would move them. A
 * macro, not an inline: it uses roll.pml's wrote, defined after the
 * include. */
#define replacement(i) \
	if \
	:: prep -> \
		deleting(i, KA); \
		sk[i] = sk[i] & ~KA; ev[i] = ev[i] & ~KA; \
		if \
		:: cur[i] == KA -> cur[i] = WANT(ph[i]); cr[i] = 0 \
		:: else -> skip \
		fi; \
		if \
		:: rnx[i] == KA -> rnx[i] = WANT(ph[i]); cr[i] = 0 \
		:: else -> skip \
		fi; \
		wrote(i, done); \
		sk[i] = sk[i] | KE; wrote(i, done) \
	:: else -> skip \
	fi
