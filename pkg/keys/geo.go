package keys

import "strconv"

// Geo keys, with the default prefix "topk" (package geo writes and reads them):
//
//	topk:{geo:<cell>}:h:<unix_hour>  HASH   "<type>" -> events in the cell and hour, "*" -> all types;
//	                                        EXPIREAT hour end + geo retention (default 400 days)
//	topk:{geo:<cell>}:u:<unix_hour>  STRING HyperLogLog (PFADD) of the user ids of the cell and hour; same expiry
//	topk:{geo:<cell>}:u:<unix_hour>:<type>
//	                                 STRING HyperLogLog of the ids of the users with events of that type; same expiry
//
// <cell> is a geohash of the store's precision (6 by default), lower-case
// base32; <unix_hour> is unix seconds / 3600. Both keys of a cell share the
// hash tag {geo:<cell>}, so one Lua call writes every hour of a cell in
// Redis Cluster. Queries only read (no temporary keys): package geo merges
// HyperLogLogs that one PFCOUNT cannot take itself.

// GeoCell returns the key builder of one geohash cell. The cell is escaped
// like a workspace id (a valid geohash needs no escaping).
func (s Space) GeoCell(cell string) GeoCell {
	return GeoCell{base: s.prefix + ":{geo:" + EscapeTag(cell) + "}:"}
}

// GeoCell builds the keys of one geohash cell. All of them share one hash slot.
type GeoCell struct {
	base string // "<prefix>:{geo:<cell>}:"
}

// Hour is the hash of the cell's events in unix hour h, per type and "*".
func (g GeoCell) Hour(h int64) string { return g.base + "h:" + strconv.FormatInt(h, 10) }

// Users is the HyperLogLog of the ids of the users with events in the cell
// in unix hour h.
func (g GeoCell) Users(h int64) string { return g.base + "u:" + strconv.FormatInt(h, 10) }

// TypeUsers is the HyperLogLog of the ids of the users with events of type
// typ in the cell in unix hour h. Event types are [a-z0-9_.-] (package
// activity), so the name cannot be confused with another key's.
func (g GeoCell) TypeUsers(h int64, typ string) string {
	return g.base + "u:" + strconv.FormatInt(h, 10) + ":" + typ
}
