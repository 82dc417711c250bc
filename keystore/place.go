package keystore

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// FindNode follows a YAML path such as "peers[2].key_chain" from n (a
// document or any node) and returns the deepest node it reaches: the
// value node of a mapping key, the item of a sequence; n's content for an
// empty path, nil for a nil n. The path's segments are the schema's field
// names, never a name of the input (a chain's, which may hold a dot).
func FindNode(n *yaml.Node, path string) *yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if path == "" {
		return n
	}
	for _, seg := range strings.Split(path, ".") {
		name, idx := seg, -1
		if i := strings.IndexByte(seg, '['); i >= 0 && strings.HasSuffix(seg, "]") {
			name = seg[:i]
			idx, _ = strconv.Atoi(seg[i+1 : len(seg)-1])
		}
		if name != "" {
			next := ChildNode(n, name)
			if next == nil {
				return n
			}
			n = next
		}
		if idx >= 0 {
			if n.Kind == yaml.AliasNode {
				n = n.Alias
			}
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return n
			}
			n = n.Content[idx]
		}
	}
	return n
}

// ChildNode is the value of the mapping key in n (an alias followed), or
// nil.
func ChildNode(n *yaml.Node, key string) *yaml.Node {
	_, v := childPair(n, key)
	return v
}

// childPair is the key node and the value node of key in the mapping n.
func childPair(n *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if n == nil {
		return nil, nil
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

// NodePos is the position in file of the node at path below root
// (FindNode); the file only when root is nil.
func NodePos(root *yaml.Node, file, path string) Pos {
	n := FindNode(root, path)
	if n == nil {
		return Pos{File: file}
	}
	return Pos{File: file, Line: n.Line, Column: n.Column}
}

// placer places the problems of one chain of a key source: the position
// of a field and its path in the source. rel is a path inside the chain's
// document ("peers[1]", "md5.secret_b64"), or inside its key number i.
type placer interface {
	// chain places rel in the chain's document ("" for the chain).
	chain(rel string) (Pos, string)
	// key places rel in the chain's key i ("" for the key).
	key(i int, rel string) (Pos, string)
	// name is the place of the chain's name.
	name() (Pos, string)
}

// join is the path rel below base.
func join(base, rel string) string {
	switch {
	case rel == "":
		return base
	case base == "":
		return rel
	case strings.HasPrefix(rel, "["):
		return base + rel
	}
	return base + "." + rel
}

// filePlacer places a key file's chain: positions from its node tree,
// paths from the top of the file (chains.NAME.keys[0].send_id).
type filePlacer struct {
	file      string
	chainName string
	nameNode  *yaml.Node // the chain's name (a key of chains)
	chainNode *yaml.Node // the chain's document
}

func (p *filePlacer) base() string { return "chains." + p.chainName }

func (p *filePlacer) chain(rel string) (Pos, string) {
	return p.pos(FindNode(p.chainNode, rel)), join(p.base(), rel)
}

func (p *filePlacer) key(i int, rel string) (Pos, string) {
	k := fmt.Sprintf("keys[%d]", i)
	return p.pos(FindNode(p.chainNode, join(k, rel))), join(p.base(), join(k, rel))
}

func (p *filePlacer) name() (Pos, string) { return p.pos(p.nameNode), "chains" }

func (p *filePlacer) pos(n *yaml.Node) Pos {
	if n == nil {
		return Pos{File: p.file}
	}
	return Pos{File: p.file, Line: n.Line, Column: n.Column}
}

// vaultPlacer places a Vault chain's problems: the chain's place (it has
// no lines) and paths inside its document (keys[0].send_id).
type vaultPlacer struct{ where string }

func (p vaultPlacer) chain(rel string) (Pos, string) { return Pos{File: p.where}, rel }

func (p vaultPlacer) key(i int, rel string) (Pos, string) {
	return Pos{File: p.where}, join(fmt.Sprintf("keys[%d]", i), rel)
}

func (p vaultPlacer) name() (Pos, string) { return Pos{File: p.where}, "" }

// shownKey is the segment of a problem's path for the mapping key k of the
// mapping at path: k when it is a field of the schema, or a chain's name
// that is a plain identifier; "*" otherwise (a secret on the wrong line
// is a mapping key too).
func shownKey(path, k string) string {
	if schemaField(k) != "" || (path == "chains" && plainName(k)) {
		return k
	}
	return "*"
}
