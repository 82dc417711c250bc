package e2e

import (
	"context"
	"net/netip"

	api "github.com/osrg/gobgp/v3/api"
	apiv4 "github.com/osrg/gobgp/v4/api"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
)

// rib is gobgpd's global RIB as the lab uses it: A's routes announced, the
// count of destinations read (a flap shows as lost routes). gobgpd v3 and
// v4 differ in how a path is written (v3: attributes packed in Any; v4:
// typed ones).
type rib interface {
	announce(ctx context.Context, p netip.Prefix, nextHop netip.Addr) error
	size(ctx context.Context) (int, error)
}

func newRIB(cc *grpc.ClientConn, v4, v6 bool) rib {
	if v4 {
		return ribV4{c: apiv4.NewGoBgpServiceClient(cc), v6: v6}
	}
	return ribV3{c: api.NewGobgpApiClient(cc), v6: v6}
}

type ribV3 struct {
	c  api.GobgpApiClient
	v6 bool
}

func (r ribV3) family() *api.Family {
	if r.v6 {
		return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
	}
	return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
}

func (r ribV3) announce(ctx context.Context, p netip.Prefix, nextHop netip.Addr) error {
	nlri, _ := anypb.New(&api.IPAddressPrefix{Prefix: p.Addr().String(), PrefixLen: uint32(p.Bits())})
	origin, _ := anypb.New(&api.OriginAttribute{Origin: 0})
	fam := r.family()
	nh, _ := anypb.New(&api.NextHopAttribute{NextHop: nextHop.String()})
	if r.v6 { // IPv6 unicast carries its next hop in MP_REACH_NLRI
		nh, _ = anypb.New(&api.MpReachNLRIAttribute{Family: fam, NextHops: []string{nextHop.String()}, Nlris: []*anypb.Any{nlri}})
	}
	_, err := r.c.AddPath(ctx, &api.AddPathRequest{
		TableType: api.TableType_GLOBAL,
		Path:      &api.Path{Family: fam, Nlri: nlri, Pattrs: []*anypb.Any{origin, nh}},
	})
	return err
}

func (r ribV3) size(ctx context.Context) (int, error) {
	t, err := r.c.GetTable(ctx, &api.GetTableRequest{TableType: api.TableType_GLOBAL, Family: r.family()})
	return int(t.GetNumDestination()), err
}

type ribV4 struct {
	c  apiv4.GoBgpServiceClient
	v6 bool
}

func (r ribV4) family() *apiv4.Family {
	if r.v6 {
		return &apiv4.Family{Afi: apiv4.Family_AFI_IP6, Safi: apiv4.Family_SAFI_UNICAST}
	}
	return &apiv4.Family{Afi: apiv4.Family_AFI_IP, Safi: apiv4.Family_SAFI_UNICAST}
}

func (r ribV4) announce(ctx context.Context, p netip.Prefix, nextHop netip.Addr) error {
	fam := r.family()
	nlri := &apiv4.NLRI{Nlri: &apiv4.NLRI_Prefix{Prefix: &apiv4.IPAddressPrefix{Prefix: p.Addr().String(), PrefixLen: uint32(p.Bits())}}}
	nh := &apiv4.Attribute{Attr: &apiv4.Attribute_NextHop{NextHop: &apiv4.NextHopAttribute{NextHop: nextHop.String()}}}
	if r.v6 {
		nh = &apiv4.Attribute{Attr: &apiv4.Attribute_MpReach{MpReach: &apiv4.MpReachNLRIAttribute{Family: fam, NextHops: []string{nextHop.String()}, Nlris: []*apiv4.NLRI{nlri}}}}
	}
	origin := &apiv4.Attribute{Attr: &apiv4.Attribute_Origin{Origin: &apiv4.OriginAttribute{Origin: 0}}}
	_, err := r.c.AddPath(ctx, &apiv4.AddPathRequest{
		TableType: apiv4.TableType_TABLE_TYPE_GLOBAL,
		Path:      &apiv4.Path{Family: fam, Nlri: nlri, Pattrs: []*apiv4.Attribute{origin, nh}},
	})
	return err
}

func (r ribV4) size(ctx context.Context) (int, error) {
	t, err := r.c.GetTable(ctx, &apiv4.GetTableRequest{TableType: apiv4.TableType_TABLE_TYPE_GLOBAL, Family: r.family()})
	return int(t.GetNumDestination()), err
}
