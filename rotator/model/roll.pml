/*
 * roll.pml: the TCP-AO key roll of rotator/machine.go, two aokeyd-managed
 * ends of one BGP session and each end's listener, with the kernel's
 * Current_key/RNext_key rules of tcpao/tcpaotest (net/ipv4/tcp_ao.c).
 * Checked exhaustively by integration/tools/model.sh (make model); its
 * random simulations are replayed against the real machine by
 * rotator/replay_test.go.
 *
 * Abstraction:
 *  - Keys: A (1, the old key) and B (2, the new one), SendID = RecvID = id,
 *    the same material on both ends. A key set is a bit mask of materials
 *    (A=1, B=2); A' (4) is new material under A's IDs (an edit in place).
 *    Current_key and RNext_key are IDs (1: A or A', whichever the socket
 *    holds; 2: B), as the kernel's are: a socket never holds A and A' at
 *    once (same IDs: EEXIST), and a segment is signed with the material
 *    of the sender's key under its Current_key's ID and verified only by
 *    that material.
 *  - The key source hands each end a phase of its desired state:
 *      0: keys {A}, want A       (before the roll)
 *      1: keys {A,B}, want B     (the new key delivered; A still accepted)
 *      2: keys {B}, want B       (A's lifetime over: A stale)
 *      3: keys {B}, want B, A revoked
 *      4: keys {}, no key wanted (A's lifetime over with no successor)
 *    Phase 1 reaches the two ends in any order, or never one of them.
 *    A's lifetime ends at one end whatever the other holds ("EV expire":
 *    0 -> 4, 1 -> 2), also while its roll still waits for a lagging peer
 *    that never gets B. A revoke (3) comes only once the other end has
 *    phase 1 (the operator's action, not a clock's). An edit ("EV edit",
 *    ed[i]) makes end i's desired A new material A' in phases 0 and 1.
 *    Each socket decides it alone (PlanSocket's rule for edits,
 *    edit.pml): where the installed A authenticated something it is held
 *    back (ReasonEdited: the installed A stays and stands in for A'),
 *    else A' replaces A at once (a delete, then the add). The daemon
 *    syncs the end's
 *    listener in the same pass, and again in any later pass ("EV lsync",
 *    its periodic full pass; only a sync that changes the listener is an
 *    event): the listener gets the desired keys and keeps every other key
 *    the end's session carries (rotator.Controller.Carried, here read
 *    from the session socket as it is: Current_key, RNext_key, a key the
 *    peer sent with), unless revoked. What the session carries is
 *    aokeyd's memory: a crash (a restart) loses it (rd[i] = 0) until the
 *    end's machine has read its session again (its next step); until
 *    then the listener sync deletes nothing but a revoked key (the
 *    daemon's start-up gate, internal/daemon/carried.go sessionsRead).
 *    A restart may also lose the carried-keys record ("EV lose-record":
 *    a purge, an old backup). The design does not rely on the record
 *    for a session that is up (the gate holds until it is read): the
 *    model keeps the record only for the mutant that trusts it in place
 *    of the gate, a record always up to date (what the session carries)
 *    until a lost-record event empties it (lost[i]).
 *  - Time: a step of the machine is one call of machine.step. Waiting for a
 *    poll is an interleaving; the switch timeout and a backoff's end are
 *    events. Three timing assumptions, each a gate on the model's steps:
 *      (a) the network's delay is shorter than a poll: a segment in flight
 *          when a machine steps lands before that machine's next step;
 *      (b) the grace period outlasts a poll: its first step only waits
 *          ("EV wait");
 *      (c) the peer sends within the grace period: retire runs only after
 *          a segment the peer signed after that wait has reached us (BGP
 *          keepalives; a grace period shorter than the peer's keepalive
 *          interval breaks it).
 *    Whether the peer switched to the new key is not assumed: the machine
 *    waits until it sees it (machine.retire's graceSent).
 *  - pkt_good counters are the bits "rose since the machine's snapshot":
 *    gb (baseGood, read by await) and og (oldGood, read by retire), both
 *    by material; ev (the pkt_good of the session's key under A's IDs is
 *    above zero: a key the peer sent with) and lg (that of A on the
 *    listener: A verified a SYN). The session the model starts with is
 *    end 0's connect through end 1's listener, signed with A (the replay
 *    builds it so): ev[0] (end 0 verified the SYN-ACK) and lg[1].
 *  - One segment in flight per direction (a TCP retransmission is signed
 *    again, so a lost segment is one not sent).
 *  - Faults, each bounded: aokeyd crashing (between steps or after any
 *    kernel write of a step) and restarting from the kernel's state,
 *    segment loss, the switch timeout, a reconnect through a listener,
 *    a restart that loses the carried-keys record; and at most one edit
 *    in place per end (EDITS=0: none). make model checks the safety
 *    assertions in two searches: every fault but edits, and edits with
 *    every fault but the lost record (see integration/tools/model.sh).
 *  - Reconnects: the session drops and BGP connects both ways; a client
 *    signs its SYN with its preferred desired key (connectguard's
 *    ConnectKeys), so an end whose desired state has no key (phase 4)
 *    opens no connection; nor, to keep the model small, does an end
 *    whose A is edited (its client socket's A' is not modelled). One of
 *    the two connects must get through while both ends open
 *    connections; when one does not, the other's must get
 *    through wherever the key it signs with still carries the session
 *    (the listener's never-strand rule). Beyond that rule the model does
 *    not require a way back: ConnectKeys offers desired keys only, so an
 *    end past its only key's lifetime, or with an edit held back, waits
 *    for its peer's connect, which carries the peer's preferred key.
 *
 * The state and step names are rotator.States() and rotator.Steps()
 * (rotator/model/model_test.go checks them); down (no socket) is not modelled:
 * a reconnect replaces both sockets at once.
 */

mtype:state = { steady, announced, grace, backoff, down };
mtype:step = { install, announce, switch, retire, restore };

#define KA 1
#define KB 2
#define KE 4   /* A': new material under A's IDs */
/* the IDs of a set of materials (A' is under A's IDs) */
#define IDM(m) (((m) & 3) | (((m) & KE) -> KA : 0))
/* the materials of a set of IDs */
#define MATS(d) ((d) | (((d) & KA) -> KE : 0))
/* the material end i's session socket holds under ID id (0: none) */
#define KEYOF(i, id) ((id) == KA -> (sk[i] & (KA | KE)) : (sk[i] & (id)))
#define DK(p) ((p) == 0 -> 1 : ((p) == 1 -> 3 : ((p) == 4 -> 0 : 2)))
#define WANT(p) ((p) == 0 -> KA : ((p) == 4 -> 0 : KB))
#define HASB(p) ((p) >= 1 && (p) <= 3)
#define REVOKED(i) (ph[i] == 3)
#define REVMASK(i) (REVOKED(i) -> KA : 0)
/* the IDs of the keys end i's session carries (rotator.CarriedKeys):
 * Current_key, RNext_key, and A's IDs when the peer sent with them (B,
 * once there, is desired for good) */
#define CARRIED(i) (cur[i] | rnx[i] | ev[i])
#include "edit.pml"

#ifdef EXECEND
/* The executor end (make model's exec search, -DEXECEND): end 1 is a
 * speaker that keys its own sockets from aokeyd's file, as BIRD does
 * (internal/birdnative, docs/wip/birdexec.md), and end 0 aokeyd's
 * machine. No machine runs at end 1: each pass of aokeyd's (EV
 * configure) writes the whole key list, which BIRD applies to its session
 * and its listener at once (bgp_reconfigure_ao_keys): the desired keys,
 * and each key no longer desired until the retire proof lets it go
 * (exec_). The file's preferred key (xp) is what BIRD sends its SYNs with
 * and sets as RNext_key at each configure; its Current_key moves only as
 * the backup of a deleted Current_key, else by the peer's RNext (the
 * kernel). End 1 has no edits in place and no listener sync of its own
 * (the file is its listener's list), and no revoke: a revoke leaves the
 * file at once, in use or not (the operator's explicit action, which the
 * never-strand rule lets through), where the machine's plan waits for
 * the retire step's proof; end 0's revoke is modelled. */
byte xp;   /* the file's preferred key (an ID) */
byte xv;   /* end 1's session: the IDs whose pkt_good is above zero */
byte xg;   /* ... whose pkt_good rose since aokeyd's last read of it */
byte xrn;  /* end 1's RNext_key at that read (0: no read, aokeyd restarted, or a new session) */
byte xq;   /* how many reads in a row found that RNext_key, up to 2 */
#define PREF(c) ((c) == 1 -> xp : WANT(ph[c]))
#define CLIENTKEYS(c) ((c) == 1 -> ln[1] : DK(ph[c]))
#define CANOPEN(c) ((c) == 1 -> xp != 0 : (!ed[c] && ph[c] != 4))
#define SETDESIRED1(p) ph[1] = p
/* end 1 has the new key for end 0's revoke: its file prefers it (its
 * desired state lags until the next configure) */
#define HASB1 (xp == KB)
#else
#define PREF(c) WANT(ph[c])
#define CLIENTKEYS(c) DK(ph[c])
/* end c opens connections: its SYN key (0: none) */
#define CANOPEN(c) (!ed[c] && ph[c] != 4)
#define SETDESIRED1(p) setDesired(1, p)
#define HASB1 HASB(ph[1])
#endif
#define SYNKEY(c) (CANOPEN(c) -> PREF(c) : 0)

#ifndef CRASHES
#define CRASHES 1
#endif
#ifndef LOSSES
#define LOSSES 1
#endif
#ifndef TIMEOUTS
#define TIMEOUTS 1
#endif
#ifndef RECONNECTS
#define RECONNECTS 1
#endif
#ifndef EDITS
#define EDITS 1
#endif
#ifndef LOSTRECORDS
#define LOSTRECORDS 1
#endif

byte ph[2];            /* desired phase per end */
byte sk[2];            /* session socket: installed keys */
byte cur[2];           /* Current_key (0: none) */
byte rnx[2];           /* RNext_key (0: none) */
byte ln[2];            /* listener keys */
byte ed[2];            /* 1: the desired A is new material (A'), held back */
mtype:state st[2];     /* machine state */
byte oldR[2];          /* machine.oldRNext (0: invalid) */
byte gb[2];            /* keys whose pkt_good rose since baseGood */
byte og[2];            /* keys whose pkt_good rose since oldGood */
byte gst[2];           /* grace: 1 !graceSent, 2 !graceBase (see machine.go); 8 a poll left in the grace period; after it, 64 then 128 the peer signed a segment and 32 it reached us */
byte ev[2];            /* 1: the pkt_good of the session's key under A's IDs is above zero */
byte lg[2];            /* 1: the pkt_good of A on the listener is above zero (it verified a SYN) */
byte cr[2];            /* while an edit of the session's A is pending (EPEND), the machine's reads since its start, its own last write of Current_key or RNext_key, or the edit: 0, 1, 2 (the base: the peer's segments in flight at the first landed before it), 3 a segment of the peer's verified since the base; 0 otherwise */
byte fl[2];            /* 1<<c: the segment on seg[c] was in flight at machine i's last step */
byte rd[2];            /* 1: end i's machine read its session since aokeyd (re)started */
#ifdef MUTANT_RECORD_TRUSTED
byte lost[2];          /* 1: end i's carried-keys record was lost at its last restart */
#endif
chan seg[2] = [1] of { byte, byte };   /* seg[i]: i -> 1-i, (keyid, rnext) */

byte crashes = CRASHES;
byte losses = LOSSES;
byte timeouts = TIMEOUTS;
byte reconnects = RECONNECTS;
byte lostrecs = LOSTRECORDS;

#define SHOW CHECK; printf("ST %e %e %d %d %d %d %d %d %d %d %d %d %d %d %d %d\n", st[0], st[1], sk[0], cur[0], rnx[0], sk[1], cur[1], rnx[1], ln[0], ln[1], ph[0], ph[1], ed[0], ed[1], lg[0], lg[1]); WITNESSED

/* The machine's in-memory state is lost; the new one starts steady and
 * reads the kernel (Controller starts every machine so). */
/* Memory the machine reads only in one state is cleared on leaving it
 * (fewer states, the same behaviour): oldR and gb in announced, og and gst
 * in grace. */
inline reset(i) {
	st[i] = steady; oldR[i] = 0; gb[i] = 0; og[i] = 0; gst[i] = 0
}

/* aokeyd restarts: the machine's memory (reset) and what the daemon knew
 * of the keys the session carries are lost. */
inline restart(i) {
	reset(i); rd[i] = 0; cr[i] = 0
}

/* A kernel write of a step is done: aokeyd may crash right after it.
 * w counts the step's writes; the trace names the write it died after. */
#define wrote(i, L) \
	w++; \
	if \
	:: crashes > 0 -> crashes--; printf("CRASHAT %d %d\n", i, w); restart(i); goto L \
	:: true \
	fi

/* Deleting key k on end i's session socket: never a key the peer's
 * Current_key or RNext_key names while the two are connected. */
inline deleting(i, k) {
	assert(cur[1 - i] != IDM(k));
	/* a revoke is the operator's: the peer's RNext may still name the
	 * revoked key (the kernel then cannot switch to it; harmless while
	 * the peer's Current_key is another key) */
	assert(REVS(i, k) || rnx[1 - i] != IDM(k))
}

/* PlanSocket(desired(ph[i]), socket i), for this key universe: adds of
 * missing desired keys; RNext to want; deletes of stale keys, except a
 * stale Current_key that is not revoked (deferred). A stale key that is
 * RNext is deletable: the plan's TCP_AO_INFO moves RNext first. A stale
 * key the peer sent with is deferred too (never-strand) until the retire
 * step proves the peer moved off it (Desired.Retire): here the plan's
 * deletes are applied only by retire_, after that proof. With nothing to
 * roll to (phase 4), the session's keys are Kept (ReasonCarried): its A
 * is Current_key. An edit held back leaves the installed A standing in
 * for A' (SDK reads the desired A as A); one not held back is the
 * replacement of A by A' (prep: the delete, then the add), after the
 * plain adds. */
inline plan(i) {
	padd = SDK(i) & ~sk[i];
	prep = (((padd & KE) && (sk[i] & KA)) -> KA : 0);
	padd = padd & ~((prep -> KE : 0));
	pinfo = (WANT(ph[i]) != 0 && rnx[i] != WANT(ph[i]));
	stale = sk[i] & ~SDK(i) & ~prep;
	pdel = 0; pdef = 0;
	if
	:: WANT(ph[i]) == 0 -> assert(IDM(stale) == cur[i])
#ifdef MUTANT_RETIRE_IN_USE
	/* mutant: a stale Current_key is deleted (forced) like a revoked one */
	:: WANT(ph[i]) != 0 && stale != 0 -> pdel = stale
#else
	:: WANT(ph[i]) != 0 && stale != 0 && IDM(stale) == cur[i] && !REVS(i, stale) -> pdef = 1
	:: WANT(ph[i]) != 0 && stale != 0 && (IDM(stale) != cur[i] || REVS(i, stale)) -> pdel = stale
#endif
	:: else -> skip
	fi
}

inline cleartmp() {
	padd = 0; prep = 0; pinfo = 0; stale = 0; pdel = 0; pdef = 0; w = 0; k = 0; wc = 0
}

/* Apply(plan): plain adds in the desired keys' order (A or A', then B),
 * the replacement of an edit (delete A, add A'), the TCP_AO_INFO change,
 * deletes (a revoked Current_key by a forced delete naming want as the new
 * Current_key). */
inline apply(i) {
	if
	:: padd & (KA | KE) -> sk[i] = sk[i] | (padd & (KA | KE)); wrote(i, done)
	:: else -> skip
	fi;
	if
	:: padd & KB -> sk[i] = sk[i] | KB; wrote(i, done)
	:: else -> skip
	fi;
	replacement(i);
	if
	:: pinfo -> rnx[i] = WANT(ph[i]); cr[i] = 0; wrote(i, done)
	:: else -> skip
	fi;
	k = 1;
	do
	:: k <= 4 && (pdel & k) ->
		deleting(i, k);
		sk[i] = sk[i] & ~k; ev[i] = ev[i] & ~IDM(k);
		if
		:: cur[i] == IDM(k) -> cur[i] = WANT(ph[i]); cr[i] = 0
		:: else -> skip
		fi;
		wrote(i, done); k = k * 2
	:: k <= 4 && !(pdel & k) -> k = k * 2
	:: k > 4 -> break
	od
}

inline toGrace(i) {
	reset(i); st[i] = grace; gst[i] = 3 | 8
}

/* the segment in flight on seg[c] arrived or was lost */
inline landed(c) {
	fl[0] = fl[0] & ~(1 << c); fl[1] = fl[1] & ~(1 << c)
}

/* after a step of machine i: the segments in flight now land before its
 * next step (the network's delay is shorter than a poll) */
inline polled(i) {
	fl[i] = (len(seg[0]) > 0) | ((len(seg[1]) > 0) << 1)
}

/* abort: RNext back to what it was (when that key is still there), then
 * backoff. */
inline abort(i) {
	if
	:: oldR[i] != 0 && oldR[i] != WANT(ph[i]) && KEYOF(i, oldR[i]) -> rnx[i] = oldR[i]; cr[i] = 0; wrote(i, done2)
	:: else -> skip
	fi;
	reset(i); st[i] = backoff
}

/* machine.steady */
inline steady_(i) {
	plan(i);
	if
	:: padd == 0 && !prep && !pinfo && pdel == 0 && !pdef && (WANT(ph[i]) == 0 || cur[i] == WANT(ph[i]) || (cur[i] & DK(ph[i]))) ->
		reset(i)
	:: else ->
		wc = (cur[i] == WANT(ph[i]));  /* wantCur, from the step's first read */
		oldR[i] = rnx[i];
		if
		:: padd != 0 || prep ->   /* install: the plan's leading adds and replacement */
			pinfo = 0; pdel = 0; apply(i)
		:: else -> skip
		fi;
		gb[i] = 0;        /* baseGood */
		if
		:: rnx[i] != WANT(ph[i]) -> rnx[i] = WANT(ph[i]); cr[i] = 0; wrote(i, done)   /* announce */
		:: else -> skip
		fi;
		if
		:: wc -> toGrace(i)
		:: else -> st[i] = announced
		fi
	fi
}

#ifdef MUTANT_SWITCH_UNPROVEN
#define PROOF(i) true
#else
#define PROOF(i) (cur[i] == WANT(ph[i]) || (gb[i] & KEYOF(i, WANT(ph[i]))))
#endif

/* machine.await: proof that the peer holds the new key is a segment
 * verified with it, or Current_key switched to it by the peer's RNext. */
inline await_(i) {
	if
	:: !KEYOF(i, WANT(ph[i])) -> reset(i)
	:: KEYOF(i, WANT(ph[i])) && PROOF(i) ->
		if
		:: cur[i] != WANT(ph[i]) -> cur[i] = WANT(ph[i]); cr[i] = 0; wrote(i, done)   /* switch */
		:: else -> skip
		fi;
		toGrace(i)
	:: KEYOF(i, WANT(ph[i])) && !PROOF(i) -> skip
	fi
}

#ifdef MUTANT_RETIRE_EARLY
/* mutant: retire right after the switch, not waiting for the peer */
#define GRACE_OVER(i) true
#define RISING(i) false
#define UNSENT(i) false
#else
#define GRACE_OVER(i) !(st[i] == grace && (gst[i] & 40) != 32)
#define RISING(i) ((pdel & og[i]) != 0)
#define UNSENT(i) ((gst[i] & 1) && (IDM(pdel) & ev[i]))
#endif

/* machine.retire, after the grace period */
inline retire_(i) {
	plan(i);
	if
	:: UNSENT(i) ->   /* wait for the peer to send with the new key */
		gst[i] = gst[i] & ~2   /* graceBase: pkt_good read now */
	:: !UNSENT(i) && RISING(i) -> og[i] = 0   /* old key's pkt_good still rising */
	:: !UNSENT(i) && !RISING(i) ->
		og[i] = 0;
		if
		:: padd != 0 || prep || pinfo || pdel != 0 -> apply(i); plan(i)
		:: else -> skip
		fi;
		if
		:: pdef -> skip
		:: else -> reset(i)
		fi
	fi
}

/* A segment from i, signed with material kid, verified at j: counters
 * rise; the peer's RNext (an ID) switches Current_key to the key j holds
 * under it. A segment j has not the material for is dropped: never while
 * the two ends hold a common key. */
inline receive(i, kid, rn) {
	if
	:: sk[1 - i] & kid ->
		ev[1 - i] = ev[1 - i] | (IDM(kid) & KA);
#ifdef EXECEND
		if :: i == 0 -> xv = xv | IDM(kid); xg = xg | IDM(kid) :: else -> skip fi;
#endif
		if :: EPEND(1 - i) && cr[1 - i] == 2 -> cr[1 - i] = 3 :: else -> skip fi;
		if :: st[1 - i] == announced -> gb[1 - i] = gb[1 - i] | kid :: else -> skip fi;
		if :: st[1 - i] == grace -> og[1 - i] = og[1 - i] | kid :: else -> skip fi;
		if
		:: rn != cur[1 - i] && KEYOF(1 - i, rn) -> cur[1 - i] = rn
		:: else -> skip
		fi;
		/* a segment the peer signed after our grace poll reached us */
		if
		:: st[1 - i] == grace && (gst[1 - i] & 128) -> gst[1 - i] = gst[1 - i] | 32
		:: else -> skip
		fi;
		/* graceSent: the peer sends with the new key */
		if
		:: st[1 - i] == grace && IDM(kid) == WANT(ph[1 - i]) && !(gst[1 - i] & 2) -> gst[1 - i] = gst[1 - i] & ~1
		:: else -> skip
		fi
	:: else ->
		printf("DROP segment %d->%d key %d\n", i, 1 - i, kid);
		assert((sk[0] & sk[1]) == 0)
	fi
}

proctype link(byte i) {
	byte kid, rn;
end:
	do
	:: atomic { len(seg[i]) == 0 && cur[i] != 0 && rnx[i] != 0 ->
		seg[i]!KEYOF(i, cur[i]), rnx[i];
		if
		:: st[1 - i] == grace && (gst[1 - i] & 64) -> gst[1 - i] = gst[1 - i] | 128
		:: else -> skip
		fi;
		printf("EV send %d\n", i); SHOW }
	:: atomic { seg[i]?kid, rn -> printf("EV recv %d\n", i); landed(i); receive(i, kid, rn); kid = 0; rn = 0; SHOW }
	:: atomic { losses > 0 && len(seg[i]) > 0 -> losses--; seg[i]?_, _; landed(i); printf("EV lose %d\n", i); SHOW }
	od
}

proctype aokeyd(byte i) {
	byte padd, prep, pinfo, stale, pdel, pdef, w, k, wc;
end:
	do
	:: atomic {
		/* a step within the grace period: the machine waits (the grace
		 * period outlasts two polls, and so two network delays) */
		fl[i] == 0 && st[i] == grace && (gst[i] & 8) ->
		printf("EV wait %d\n", i);
		based(i);
		gst[i] = (gst[i] - 8) | 64;
		polled(i);
		SHOW
	}
	:: atomic {
		/* one machine.step (a retire only once the grace period is over) */
		fl[i] == 0 && GRACE_OVER(i) ->
		printf("EV step %d\n", i);
		rd[i] = 1;  /* the step reads the session's socket first */
		based(i);
#ifdef MUTANT_RECORD_TRUSTED
		lost[i] = 0;  /* and the record is written again from that read */
#endif
		if
		:: st[i] == announced -> await_(i)
		:: st[i] == grace -> retire_(i)
		:: else -> steady_(i)   /* steady, or backoff whose time is up */
		fi;
done:
		polled(i);
		cleartmp();
		SHOW
	}
	:: atomic { fl[i] == 0 && st[i] == announced && timeouts > 0 && KEYOF(i, WANT(ph[i])) &&
		!PROOF(i) ->
		timeouts--;
		printf("EV timeout %d\n", i);
		based(i);
		abort(i);
done2:
		polled(i);
		cleartmp();
		SHOW
	}
	:: atomic { crashes > 0 -> crashes--; printf("EV crash %d\n", i); restart(i); SHOW }
	/* a restart that loses the carried-keys record too */
	:: atomic { lostrecs > 0 -> lostrecs--; printf("EV lose-record %d\n", i); restart(i);
#ifdef MUTANT_RECORD_TRUSTED
		lost[i] = 1;
#endif
		SHOW }
	od
}

#ifdef EXECEND
#include "exec.pml"
#endif

/* The daemon's listener sync of end i (rotator.SyncListener with
 * Observed.Carried): the desired keys are added; a key no longer desired
 * goes unless the end's session carries its IDs; a revoked key goes
 * whatever. New material under A's IDs replaces A where A authenticated
 * nothing (LHOLD), else the installed A stays (and phases 0 and 1 desire
 * A, so the listener holds it then). */
#ifdef MUTANT_LIFETIME_DROPS_LISTENER
/* mutant: the listener holds the desired keys only (a key past its
 * lifetime goes although a session carries it) */
#define LNKEEP(i) 0
#elif defined(MUTANT_RECORD_TRUSTED)
/* mutant: after a restart the listener sync keeps what the carried-keys
 * record says instead of waiting for the session's read: safe while the
 * record is there, not once it is lost */
#define LNKEEP(i) (rd[i] -> (ln[i] & MATS(CARRIED(i)) & ~REVMASK(i)) : (lost[i] -> 0 : (ln[i] & MATS(CARRIED(i)) & ~REVMASK(i))))
#elif defined(MUTANT_RESTART_NO_GATE)
/* mutant: after a restart the listener sync goes ahead before the
 * session was read, knowing of no key it carries (the behaviour before
 * issue 47) */
#define LNKEEP(i) (rd[i] -> (ln[i] & MATS(CARRIED(i)) & ~REVMASK(i)) : 0)
#else
#define LNKEEP(i) (rd[i] -> (ln[i] & MATS(CARRIED(i)) & ~REVMASK(i)) : (ln[i] & ~REVMASK(i)))
#endif
#define LNT(i) (LDK(i) | (LNKEEP(i) & ~((LDK(i) & KE) -> KA : 0)))

inline syncListener(i) {
	/* never strand: a key whose IDs the session carries stays on the
	 * listener until a revoke removes it (phases 0 and 1 desire A, and
	 * its edit is held back while the session carries it) */
	assert((ln[i] & MATS(CARRIED(i)) & ~REVMASK(i) & ~LNT(i)) == 0);
	ln[i] = LNT(i);
	if
	:: !(ln[i] & KA) -> lg[i] = 0   /* a later A has its own counters */
	:: else -> skip
	fi;
	/* an edit is never half applied to a key that authenticated
	 * something: new material on the listener while the session's old
	 * material carries it (CHECK) */
	assert(!HALF_L(i))
}

/* The key source (and the daemon's listener sync in the same pass), and
 * reconnects through a listener. */
inline setDesired(i, p) {
	/* a roll towards another key starts over */
	if
	:: WANT(p) != WANT(ph[i]) && (st[i] == announced || st[i] == grace || st[i] == backoff) -> reset(i)
	:: else -> skip
	fi;
	ph[i] = p;
	if
	:: p > 1 -> ed[i] = 0; cr[i] = 0   /* A no longer desired: no edit of it either */
	:: else -> skip
	fi;
	syncListener(i)
}

/* A session drop and a reconnect: client c connects to the listener of s
 * with its desired keys, its preferred key as Current_key and RNext_key
 * (connectguard's ConnectKeys); the accepted socket has the listener's
 * keys, Current_key by the SYN's RNextKeyID, RNext by its KeyID. */
inline reconnect(c) {
	sk[c] = CLIENTKEYS(c); cur[c] = PREF(c); rnx[c] = PREF(c);
	sk[1 - c] = ln[1 - c]; cur[1 - c] = PREF(c); rnx[1 - c] = PREF(c);
	reset(0); reset(1); fl[0] = 0; fl[1] = 0; cr[0] = 0; cr[1] = 0;
	/* counters: the client verified the SYN-ACK with its preferred key;
	 * the accepted socket's copies start at zero; the listener's key
	 * verified the SYN */
	ev[c] = PREF(c) & KA; ev[1 - c] = 0;
#ifdef EXECEND
	/* end 1's new session: no base (its counts start again) */
	xv = (c == 1 -> PREF(c) : 0); xg = xv; xrn = 0; xq = 0;
#endif
	if
	:: SYNKEY(c) == KA -> lg[1 - c] = 1
	:: else -> skip
	fi;
	do
	:: seg[0]?_, _
	:: seg[1]?_, _
	:: empty(seg[0]) && empty(seg[1]) -> break
	od;
	printf("EV reconnect %d\n", c);
	SHOW
}

/* the listener of s takes the SYN of its peer when it holds the key the
 * peer signs it with */
#define ACCEPTS(s) (ln[s] & SYNKEY(1 - s))

proctype env() {
end:
	do
	:: atomic { ph[0] == 0 -> setDesired(0, 1); printf("EV deliver 0 1\n"); SHOW }
	:: atomic { ph[1] == 0 -> SETDESIRED1(1); printf("EV deliver 1 1\n"); SHOW }
	/* A's lifetime ends, whatever the other end holds (a lagging peer) */
	:: atomic { ph[0] == 1 -> setDesired(0, 2); printf("EV expire 0 2\n"); SHOW }
	:: atomic { ph[1] == 1 -> SETDESIRED1(2); printf("EV expire 1 2\n"); SHOW }
	/* ... with no successor */
	:: atomic { ph[0] == 0 -> setDesired(0, 4); printf("EV expire 0 4\n"); SHOW }
	:: atomic { ph[1] == 0 -> SETDESIRED1(4); printf("EV expire 1 4\n"); SHOW }
	/* ... and the successor comes late */
	:: atomic { ph[0] == 4 -> setDesired(0, 2); printf("EV deliver 0 2\n"); SHOW }
	:: atomic { ph[1] == 4 -> SETDESIRED1(2); printf("EV deliver 1 2\n"); SHOW }
	:: atomic { ph[0] == 1 && HASB1 -> setDesired(0, 3); printf("EV deliver 0 3\n"); SHOW }
#ifndef EXECEND
	:: atomic { ph[1] == 1 && HASB(ph[0]) -> SETDESIRED1(3); printf("EV deliver 1 3\n"); SHOW }
#endif
	/* A edited in place in end i's key source */
	:: atomic { EDITS && ph[0] <= 1 && !ed[0] -> ed[0] = 1; syncListener(0); printf("EV edit 0\n"); SHOW }
#ifndef EXECEND
	:: atomic { EDITS && ph[1] <= 1 && !ed[1] -> ed[1] = 1; syncListener(1); printf("EV edit 1\n"); SHOW }
#endif
	/* the daemon's periodic pass syncs a listener that is out of date */
	:: atomic { LNT(0) != ln[0] -> syncListener(0); printf("EV lsync 0\n"); SHOW }
#ifndef EXECEND
	:: atomic { LNT(1) != ln[1] -> syncListener(1); printf("EV lsync 1\n"); SHOW }
#endif
	/* the session drops: BGP connects both ways, a SYN with the client's
	 * preferred key needs that key on the other end's listener */
	:: atomic { reconnects > 0 -> reconnects--;
		/* never strand: a listener takes its peer's SYN when the key
		 * it is signed with still carries the end's session */
		assert(ACCEPTS(0) || !(CARRIED(0) & SYNKEY(1)));
		assert(ACCEPTS(1) || !(CARRIED(1) & SYNKEY(0)));
		if
		:: ACCEPTS(1) -> reconnect(0)
		:: ACCEPTS(0) -> reconnect(1)
		:: else ->
			/* neither connect gets through: only while an end opens
			 * none (see the header); the session is left as it was */
			assert(!CANOPEN(0) || !CANOPEN(1));
			reconnects++
		fi }
	od
}

init {
	atomic {
		ph[0] = 0; ph[1] = 0;
		sk[0] = KA; cur[0] = KA; rnx[0] = KA; ln[0] = KA;
		sk[1] = KA; cur[1] = KA; rnx[1] = KA; ln[1] = KA;
		st[0] = steady; st[1] = steady;
		rd[0] = 1; rd[1] = 1;
		/* the session is end 0's connect through end 1's listener */
		ev[0] = 1; lg[1] = 1;
		printf("EV init\n");
		SHOW;
		run env();
		run link(0); run link(1);
#ifdef EXECEND
		xp = KA;
		run aokeyd(0); run executor(1)
#else
		run aokeyd(0); run aokeyd(1)
#endif
	}
}

#define bothNew (HASB(ph[0]) && HASB(ph[1]))
#define sendNew (cur[0] == KB && cur[1] == KB)
#define bothOld ((ph[0] == 2 || ph[0] == 3) && (ph[1] == 2 || ph[1] == 3))
#define oldGone ((sk[0] & (KA | KE)) == 0 && (sk[1] & (KA | KE)) == 0 && (ln[0] & (KA | KE)) == 0 && (ln[1] & (KA | KE)) == 0)

ltl live { [] (bothNew -> <> sendNew) && [] (bothOld -> <> oldGone) }
