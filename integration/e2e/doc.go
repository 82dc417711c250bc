// Package e2e holds the end-to-end scenarios on the real TCP-AO kernel:
// gobgpd v3.37 managed by aokeyd (router A) peering with BIRD 2.17 (router
// B) over veth between two network namespaces, with routes flowing both
// ways so that a dropped session shows as lost routes. They run in the
// guest VM (make test-kernel) with gobgpd, aokeyd and aoctl in PATH.
package e2e
