#include "broker/schema/avro_schema.h"

#include <boost/json.hpp>
#include <map>
#include <set>
#include <unordered_map>

namespace magnetar::broker {

namespace json = boost::json;

// The model: a graph of nodes (named types are defined once and referenced by index, so
// recursive records work).

enum class AvroKind {
  kNull,
  kBoolean,
  kInt,
  kLong,
  kFloat,
  kDouble,
  kBytes,
  kString,
  kRecord,
  kEnum,
  kArray,
  kMap,
  kUnion,
  kFixed,
};

struct AvroField {
  std::string name;
  std::vector<std::string> aliases;
  int type = -1;
  bool hasDefault = false;
};

struct AvroNode {
  AvroKind kind = AvroKind::kNull;
  std::string name;                  // simple name of a named type
  std::string fullName;              // namespace.name
  std::vector<std::string> aliases;  // full names
  std::vector<AvroField> fields;     // record
  std::vector<std::string> symbols;  // enum
  bool hasEnumDefault = false;
  int element = -1;           // array items / map values
  std::vector<int> branches;  // union
  int64_t size = 0;           // fixed
};

class AvroSchema {
 public:
  std::vector<AvroNode> nodes;
  int root = -1;
  json::value definition;
};

namespace {

const std::unordered_map<std::string, AvroKind>& primitives() {
  static const std::unordered_map<std::string, AvroKind> m = {
      {"null", AvroKind::kNull},   {"boolean", AvroKind::kBoolean}, {"int", AvroKind::kInt},
      {"long", AvroKind::kLong},   {"float", AvroKind::kFloat},     {"double", AvroKind::kDouble},
      {"bytes", AvroKind::kBytes}, {"string", AvroKind::kString},
  };
  return m;
}

class AvroParser {
 public:
  explicit AvroParser(AvroSchema* out) : out_(out) {}

  // Index of the node for `v` in namespace `ns`, or -1 with error_ set.
  int parse(const json::value& v, const std::string& ns) {
    if (!error_.empty()) return -1;
    if (v.is_string()) return parseName(std::string(v.as_string()), ns);
    if (v.is_array()) {
      AvroNode u;
      u.kind = AvroKind::kUnion;
      for (const auto& b : v.as_array()) {
        int idx = parse(b, ns);
        if (idx < 0) return -1;
        u.branches.push_back(idx);
      }
      return add(std::move(u));
    }
    if (!v.is_object()) return fail("No type");
    const json::object& o = v.as_object();
    const json::value* t = o.if_contains("type");
    if (!t) return fail("No type: " + json::serialize(v));
    if (!t->is_string()) return parse(*t, ns);  // {"type": {...}} or {"type": [...]}
    std::string type(t->as_string());
    if (type == "record" || type == "error") return parseRecord(o, ns);
    if (type == "enum") return parseEnum(o, ns);
    if (type == "fixed") return parseFixed(o, ns);
    if (type == "array" || type == "map") {
      const json::value* e = o.if_contains(type == "array" ? "items" : "values");
      if (!e) return fail(type == "array" ? "Array has no items type" : "Map has no values type");
      int idx = parse(*e, ns);
      if (idx < 0) return -1;
      AvroNode n;
      n.kind = type == "array" ? AvroKind::kArray : AvroKind::kMap;
      n.element = idx;
      return add(std::move(n));
    }
    return parseName(type, ns);  // a primitive with attributes (logicalType...) or a reference
  }

  const std::string& error() const { return error_; }

 private:
  int add(AvroNode n) {
    out_->nodes.push_back(std::move(n));
    return static_cast<int>(out_->nodes.size()) - 1;
  }
  int fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return -1;
  }

  int parseName(const std::string& name, const std::string& ns) {
    auto p = primitives().find(name);
    if (p != primitives().end()) {
      AvroNode n;
      n.kind = p->second;
      return add(std::move(n));
    }
    std::string full = name.find('.') == std::string::npos && !ns.empty() ? ns + "." + name : name;
    auto it = named_.find(full);
    if (it == named_.end()) it = named_.find(name);
    if (it == named_.end()) return fail("\"" + name + "\" is not a defined name");
    return it->second;
  }

  // Sets the names of a named type; false (error_ set) when it has none or is redefined.
  bool nameNode(const json::object& o, const std::string& ns, AvroNode* n, std::string* childNs) {
    const json::value* name = o.if_contains("name");
    if (!name || !name->is_string() || name->as_string().empty()) {
      fail("No name in schema: " + json::serialize(o));
      return false;
    }
    std::string nm(name->as_string());
    std::string space = ns;
    if (const json::value* s = o.if_contains("namespace"); s && s->is_string()) {
      space = std::string(s->as_string());
    }
    size_t dot = nm.rfind('.');
    if (dot != std::string::npos) {
      space = nm.substr(0, dot);
      nm = nm.substr(dot + 1);
    }
    n->name = nm;
    n->fullName = space.empty() ? nm : space + "." + nm;
    if (const json::value* a = o.if_contains("aliases"); a && a->is_array()) {
      for (const auto& alias : a->as_array()) {
        if (!alias.is_string()) continue;
        std::string s(alias.as_string());
        if (s.find('.') == std::string::npos && !space.empty()) {
          std::string full = space;
          full += '.';
          full += s;
          s = std::move(full);
        }
        n->aliases.push_back(std::move(s));
      }
    }
    if (named_.count(n->fullName)) {
      fail("Can't redefine: " + n->fullName);
      return false;
    }
    *childNs = space;
    return true;
  }

  int parseRecord(const json::object& o, const std::string& ns) {
    AvroNode n;
    n.kind = AvroKind::kRecord;
    std::string childNs;
    if (!nameNode(o, ns, &n, &childNs)) return -1;
    const json::value* fields = o.if_contains("fields");
    if (!fields || !fields->is_array()) return fail("Record has no fields: " + json::serialize(o));
    int idx = add(n);
    named_[n.fullName] = idx;  // before the fields: they may refer to the record itself
    std::vector<AvroField> parsed;
    std::set<std::string> names;
    for (const auto& f : fields->as_array()) {
      const json::object* fo = f.if_object();
      const json::value* fname = fo ? fo->if_contains("name") : nullptr;
      if (!fname || !fname->is_string()) return fail("No field name: " + json::serialize(f));
      const json::value* ftype = fo->if_contains("type");
      if (!ftype) return fail("No field type: " + json::serialize(f));
      AvroField af;
      af.name = std::string(fname->as_string());
      if (!names.insert(af.name).second) return fail("Duplicate field " + af.name);
      af.type = parse(*ftype, childNs);
      if (af.type < 0) return -1;
      af.hasDefault = fo->contains("default");
      if (const json::value* a = fo->if_contains("aliases"); a && a->is_array()) {
        for (const auto& alias : a->as_array()) {
          if (alias.is_string()) af.aliases.emplace_back(alias.as_string());
        }
      }
      parsed.push_back(std::move(af));
    }
    out_->nodes[idx].fields = std::move(parsed);
    return idx;
  }

  int parseEnum(const json::object& o, const std::string& ns) {
    AvroNode n;
    n.kind = AvroKind::kEnum;
    std::string childNs;
    if (!nameNode(o, ns, &n, &childNs)) return -1;
    const json::value* symbols = o.if_contains("symbols");
    if (!symbols || !symbols->is_array()) return fail("Enum has no symbols: " + json::serialize(o));
    for (const auto& s : symbols->as_array()) {
      if (!s.is_string()) return fail("Enum symbol is not a string");
      n.symbols.emplace_back(s.as_string());
    }
    n.hasEnumDefault = o.contains("default");
    std::string full = n.fullName;
    int idx = add(std::move(n));
    named_[full] = idx;
    return idx;
  }

  int parseFixed(const json::object& o, const std::string& ns) {
    AvroNode n;
    n.kind = AvroKind::kFixed;
    std::string childNs;
    if (!nameNode(o, ns, &n, &childNs)) return -1;
    const json::value* size = o.if_contains("size");
    if (!size || !size->is_int64()) return fail("Invalid or no size: " + json::serialize(o));
    n.size = size->as_int64();
    std::string full = n.fullName;
    int idx = add(std::move(n));
    named_[full] = idx;
    return idx;
  }

  AvroSchema* out_;
  std::unordered_map<std::string, int> named_;
  std::string error_;
};

// Avro's Resolver (what Pulsar's SchemaValidator runs through ResolvingGrammarGenerator) between
// two schema graphs: a record matches a record whatever their names, an enum or a fixed needs
// the same simple name (or a reader alias of the writer's full name), a reader union takes the
// branch ReaderUnion.firstMatchingBranch picks. Pairs under examination count as compatible
// (recursive types).
class Resolver {
 public:
  Resolver(const AvroSchema& reader, const AvroSchema& writer) : r_(reader), w_(writer) {}

  bool canRead(int ri, int wi) {
    auto key = std::make_pair(ri, wi);
    auto memo = memo_.find(key);
    if (memo != memo_.end()) return memo->second;
    memo_[key] = true;
    bool ok = compute(ri, wi);
    memo_[key] = ok;
    return ok;
  }

 private:
  static bool nameMatches(const AvroNode& r, const AvroNode& w) {
    if (r.name == w.name) return true;
    for (const auto& a : r.aliases) {
      if (a == w.fullName) return true;
    }
    return false;
  }
  static bool fullNameMatches(const AvroNode& r, const AvroNode& w) {
    if (r.fullName == w.fullName) return true;
    for (const auto& a : r.aliases) {
      if (a == w.fullName) return true;
    }
    return false;
  }
  static bool isNamed(AvroKind k) {
    return k == AvroKind::kRecord || k == AvroKind::kEnum || k == AvroKind::kFixed;
  }
  // Avro's Promote: int -> long -> float -> double, string <-> bytes.
  static bool promotes(AvroKind r, AvroKind w) {
    switch (r) {
      case AvroKind::kLong:
        return w == AvroKind::kInt;
      case AvroKind::kFloat:
        return w == AvroKind::kInt || w == AvroKind::kLong;
      case AvroKind::kDouble:
        return w == AvroKind::kInt || w == AvroKind::kLong || w == AvroKind::kFloat;
      case AvroKind::kBytes:
        return w == AvroKind::kString;
      case AvroKind::kString:
        return w == AvroKind::kBytes;
      default:
        return false;
    }
  }

  bool compute(int ri, int wi) {
    const AvroNode& r = r_.nodes[ri];
    const AvroNode& w = w_.nodes[wi];
    if (w.kind == AvroKind::kUnion) {  // Avro's WriterUnion: every branch must resolve
      for (int wb : w.branches) {
        if (!canRead(ri, wb)) return false;
      }
      return true;
    }
    if (r.kind == w.kind) {
      switch (r.kind) {
        case AvroKind::kArray:
        case AvroKind::kMap:
          return canRead(r.element, w.element);
        case AvroKind::kFixed:
          return nameMatches(r, w) && r.size == w.size;
        case AvroKind::kEnum: {
          if (!nameMatches(r, w)) return false;
          if (r.hasEnumDefault) return true;
          std::set<std::string> known(r.symbols.begin(), r.symbols.end());
          for (const auto& s : w.symbols) {
            if (!known.count(s)) return false;
          }
          return true;
        }
        case AvroKind::kRecord:
          return recordCompatible(r, w);
        default:
          return true;  // same primitive
      }
    }
    if (r.kind == AvroKind::kUnion) {
      int j = firstMatchingBranch(r, wi);
      return j >= 0 && canRead(r.branches[static_cast<size_t>(j)], wi);
    }
    return promotes(r.kind, w.kind);
  }

  // Avro's ReaderUnion.firstMatchingBranch for writer node wi (not a union): the first branch of
  // its type (of a named type: of its full name); else, for a record, a branch that matches it
  // shallowly (the last of its simple name, else the first); else the first a promotion reaches.
  int firstMatchingBranch(const AvroNode& r, int wi) {
    const AvroNode& w = w_.nodes[wi];
    int structureMatch = -1;
    for (size_t j = 0; j < r.branches.size(); ++j) {
      const AvroNode& b = r_.nodes[r.branches[j]];
      if (b.kind != w.kind) continue;
      if (!isNamed(w.kind) || fullNameMatches(b, w)) return static_cast<int>(j);
      if (w.kind == AvroKind::kRecord && !recordMatchError(r.branches[j], wi) &&
          (structureMatch < 0 || b.name == w.name)) {
        structureMatch = static_cast<int>(j);
      }
    }
    if (structureMatch >= 0) return structureMatch;
    for (size_t j = 0; j < r.branches.size(); ++j) {
      if (promotes(r_.nodes[r.branches[j]].kind, w.kind)) return static_cast<int>(j);
    }
    return -1;
  }

  // Avro's hasMatchError(RecordAdjust.resolve(writer, reader)): a reader field without default
  // is missing, or a field's own resolution fails at its top (errorAction).
  bool recordMatchError(int ri, int wi) {
    auto key = std::make_pair(ri, wi);
    if (!shallowSeen_.insert(key).second) return false;  // under examination: a placeholder
    const AvroNode& r = r_.nodes[ri];
    const AvroNode& w = w_.nodes[wi];
    bool error = false;
    for (const auto& rf : r.fields) {
      const AvroField* match = writerField(rf, w);
      if (!match ? !rf.hasDefault : errorAction(rf.type, match->type)) {
        error = true;
        break;
      }
    }
    shallowSeen_.erase(key);
    return error;
  }

  // Whether Avro's Resolver.resolve(writer, reader) is an ErrorAction itself (not one nested in
  // a record's fields, a container's element or a union's branch).
  bool errorAction(int ri, int wi) {
    const AvroNode& r = r_.nodes[ri];
    const AvroNode& w = w_.nodes[wi];
    if (w.kind == AvroKind::kUnion) return false;
    if (r.kind == w.kind) {
      switch (r.kind) {
        case AvroKind::kFixed:
          return !nameMatches(r, w) || r.size != w.size;
        case AvroKind::kEnum:
          return !nameMatches(r, w);
        case AvroKind::kRecord:
          for (const auto& rf : r.fields) {
            if (!writerField(rf, w) && !rf.hasDefault) return true;
          }
          return false;
        default:
          return false;
      }
    }
    if (r.kind == AvroKind::kUnion) return firstMatchingBranch(r, wi) < 0;
    return !promotes(r.kind, w.kind);
  }

  // The writer's field a reader field reads: by name, else by one of its aliases.
  static const AvroField* writerField(const AvroField& rf, const AvroNode& w) {
    for (const auto& wf : w.fields) {
      if (wf.name == rf.name) return &wf;
    }
    for (const auto& alias : rf.aliases) {
      for (const auto& wf : w.fields) {
        if (wf.name == alias) return &wf;
      }
    }
    return nullptr;
  }

  bool recordCompatible(const AvroNode& r, const AvroNode& w) {
    for (const auto& rf : r.fields) {
      const AvroField* match = writerField(rf, w);
      if (!match) {
        if (!rf.hasDefault) return false;  // MISSING_REQUIRED_FIELD
      } else if (!canRead(rf.type, match->type)) {
        return false;
      }
    }
    return true;
  }

  const AvroSchema& r_;
  const AvroSchema& w_;
  std::map<std::pair<int, int>, bool> memo_;
  std::set<std::pair<int, int>> shallowSeen_;
};

// Jackson's DefaultPrettyPrinter: objects one entry per line ("key" : value, two spaces per
// object level), arrays inline ("[ a, b ]"), empty ones "{ }" / "[ ]".
void pretty(const json::value& v, int level, std::string* out) {
  if (v.is_object()) {
    const auto& o = v.as_object();
    if (o.empty()) {
      *out += "{ }";
      return;
    }
    *out += "{";
    bool first = true;
    for (const auto& [k, e] : o) {
      *out += first ? "\n" : ",\n";
      first = false;
      out->append(2 * (level + 1), ' ');
      *out += json::serialize(json::string(k));
      *out += " : ";
      pretty(e, level + 1, out);
    }
    *out += "\n";
    out->append(2 * level, ' ');
    *out += "}";
  } else if (v.is_array()) {
    const auto& a = v.as_array();
    if (a.empty()) {
      *out += "[ ]";
      return;
    }
    *out += "[ ";
    for (size_t i = 0; i < a.size(); ++i) {
      if (i) *out += ", ";
      pretty(a[i], level, out);
    }
    *out += " ]";
  } else {
    *out += json::serialize(v);
  }
}

}  // namespace

Result<std::shared_ptr<const AvroSchema>> parseAvroSchema(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) {
    return Status::invalidArgument("Cannot parse schema: " + ec.message());
  }
  auto s = std::make_shared<AvroSchema>();
  AvroParser parser(s.get());
  s->root = parser.parse(v, "");
  if (s->root < 0) return Status::invalidArgument(parser.error());
  s->definition = std::move(v);
  return std::shared_ptr<const AvroSchema>(std::move(s));
}

bool canRead(const AvroSchema& reader, const AvroSchema& writer) {
  Resolver r(reader, writer);
  return r.canRead(reader.root, writer.root);
}

std::string avroPrettyString(const AvroSchema& s) {
  std::string out;
  pretty(s.definition, 0, &out);
  return out;
}

bool avroEquals(const AvroSchema& a, const AvroSchema& b) { return a.definition == b.definition; }

}  // namespace magnetar::broker
