/*
 * exec.pml: the executor end of roll.pml (included by it with -DEXECEND):
 * one pass of aokeyd's for end 1, a speaker that keys its own sockets
 * from aokeyd's file, as BIRD (internal/birdnative's planPeer), and the
 * process that runs it. roll.pml declares its state (xp, xv, xg, xrn,
 * xq) and its hooks in the kernel's receive, the reconnect and the
 * environment; make model searches it as "exec" and checks its mutant
 * (mutant_exec_retire_unseen.pml).
 */
#ifdef MUTANT_EXEC_RETIRE_UNSEEN
/* mutant: an old key the peer sent with leaves the file once its count
 * stopped, before the peer was seen sending with a desired key (the
 * proof that it sends with the preferred key dropped) */
#define XSEEN(i) 1
#define XSENT(i) 1
#else
/* the peer was seen sending with a desired key on end i's session */
#define XSEEN(i) ((xv & DK(ph[i])) != 0)
/* ... and with the preferred key since a read that found it RNext_key
 * for the second time in a row: our segments that asked for another key
 * landed before the first of the two (the network's delay is shorter
 * than a poll), and the peer's segments signed before it followed the
 * last of them before the second; so what it sent since was signed with
 * its Current_key for good (the machine's graceSent after its wait;
 * birdnative's session.settled, where the two reads are two network
 * delays, settleAfter) */
#define XSENT(i) (xrn == xpref && xq == 2 && (xg & xpref))
#endif

/* One pass of aokeyd's for the executor end: birdnative's planPeer, which
 * is rotator.PlanSocket on the file as a socket (RNext_key its preferred
 * key, Current_key the session's) and rotator.RetireProof. Until the peer
 * was seen sending with a desired key the file is planned as a listener
 * every key carries: nothing goes. Then a key no longer desired that the peer never sent with (on this
 * session) goes; one it sent with goes once the peer sent with the
 * preferred key since a settled read (XSENT: the machine's graceSent)
 * and no old key's pkt_good rose since that read
 * (all or nothing, RetireProof); neither the
 * file's preferred key nor the session's Current_key (the key the peer
 * last authenticated BIRD's segments with, which its RNext may still ask
 * for) ever. */
inline exec_(i) {
	xnext = rnx[i];   /* the read: RNext_key before this configure's write */
	xpref = (WANT(ph[i]) != 0 -> WANT(ph[i]) : xp);
	stale = ln[i] & ~DK(ph[i]);
	pdel = 0;
	if
	:: XSEEN(i) ->
		pdel = pdel | (stale & ~xpref & ~cur[i] & ~xv);
		if
		:: XSENT(i) && !(xg & stale) -> pdel = pdel | (stale & ~xpref & ~cur[i])
		:: else -> skip
		fi
	:: else -> skip
	fi;
	k = 1;
	do
	:: k <= 2 && (pdel & k) -> deleting(i, k); k = k * 2
	:: k <= 2 && !(pdel & k) -> k = k * 2
	:: k > 2 -> break
	od;
	ln[i] = (ln[i] | DK(ph[i])) & ~pdel;
	sk[i] = ln[i];
	ev[i] = ev[i] & ~pdel; xv = xv & ~pdel;
	xp = (WANT(ph[i]) != 0 -> WANT(ph[i]) : (ln[i] & xp));
	if
	:: xp != 0 -> rnx[i] = xp
	:: else -> skip
	fi;
	if
	:: cur[i] != 0 && !(sk[i] & cur[i]) -> cur[i] = xp
	:: else -> skip
	fi;
	xq = (xnext == xrn && xrn != 0 -> (xq < 2 -> xq + 1 : 2) : 1);
	xg = 0; xrn = xnext
}

proctype executor(byte i) {
	byte stale, pdel, k, xpref, xnext;
end:
	do
	:: atomic { fl[i] == 0 -> printf("EV configure %d\n", i); exec_(i); polled(i); stale = 0; pdel = 0; k = 0; xpref = 0; xnext = 0; SHOW }
	/* aokeyd restarts: the previous read (the base) is lost */
	:: atomic { crashes > 0 -> crashes--; printf("EV crash %d\n", i); xrn = 0; xq = 0; SHOW }
	od
}
