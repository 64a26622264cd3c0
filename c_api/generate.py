#!/usr/bin/env python3
"""
generate.py - writes ddnn's binding ABI and its Fortran modules from the public headers.

  generate.py --include DIR [--include DIR ...] --bindings c_api/bindings.txt
              --hand-c c_api/capi_hand.cxx --hand-f fortran/ddnn_hand.F90 --out OUTDIR [--strict]

Reads every PETSC_EXTERN PetscErrorCode DDxxx(...) prototype, the enums (typedef enum {...} DDxxx
with their const char *const DDxxxs[] names), the object typedefs (typedef struct _p_DDxxx *DDxxx
with a DD_XXX_CLASSID), the string type names (#define DDLAYERCONV "conv") and the integer
constants (#define DD_MAX_DIM 8) of the headers, and writes into OUTDIR:

  ddnn_capi_functions.h   the ABI prototypes (included by c_api/ddnn_capi.h)
  capi_classes.hpp        the class ids of the handles (for c_api/capi.hpp)
  capi_generated.cxx      the ABI shims ddnn_xxx(): check and convert, call DDXxx(), convert back
  ddnn_capi.F90           module ddnn_capi: a bind(C) interface per ABI function (generated and hand-written)
  ddnn.F90                module ddnn: the object types, the enum and type-name constants, and a
                          subroutine DDXxx(..., ierr) per function, real(4)/real(8) variants of
                          value arrays and scalar variants of one-array setters; fortran/ddnn_hand.F90
                          is spliced in for the functions bound by hand
  ddnn_capi_skipped.txt   the functions not bound, and why

The default rule and the exceptions (c_api/bindings.txt) are described in that file and below.
Python 3 standard library only.
"""
import argparse
import os
import re
import sys

# ------------------------------------------------------------------------------------------------
# reading the headers

PETSC_OBJECTS = {'Vec': 'Vec', 'DM': 'DM', 'PetscViewer': 'PetscViewer'}  # PETSc objects taken by handle
EXTERNAL_ENUMS = {'NormType': 4}  # PETSc enums (number of values the ABI accepts)


def strip_comments(text):
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    return re.sub(r'//[^\n]*', ' ', text)


class Api:
    def __init__(self):
        self.functions = []  # (name, [arg types]) in header order
        self.enums = {}  # name -> [(enumerator, value)]
        self.classes = {}  # DDTensor -> DD_TENSOR_CLASSID
        self.strtypes = set()  # DDLayerType & co.
        self.strconsts = []  # (DDLAYERCONV, 'conv')
        self.intconsts = []  # (DD_MAX_DIM, 8)


def read_headers(dirs):
    api = Api()
    files = []
    for d in dirs:
        files += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith('.h'))
    raw = ''
    for f in files:
        with open(f) as fh:
            raw += fh.read() + '\n'
    for m in re.finditer(r'^\s*#\s*define\s+(DD[A-Z0-9_]*)\s+"([^"]*)"', raw, re.M):
        api.strconsts.append((m.group(1), m.group(2)))
    for m in re.finditer(r'^\s*#\s*define\s+(DD_[A-Z0-9_]+)\s+(\d+)\b', raw, re.M):
        api.intconsts.append((m.group(1), int(m.group(2))))
    text = strip_comments(raw)
    text = re.sub(r'^\s*#[^\n]*(\\\n[^\n]*)*', ' ', text, flags=re.M)  # preprocessor lines
    ids = set(re.findall(r'PETSC_EXTERN\s+PetscClassId\s+(DD_\w+_CLASSID)', text))
    for m in re.finditer(r'typedef\s+struct\s+_p_(\w+)\s*\*\s*(\w+)\s*;', text):
        cid = 'DD_' + m.group(2)[2:].upper() + '_CLASSID'
        if cid in ids:
            api.classes[m.group(2)] = cid
    for m in re.finditer(r'typedef\s+const\s+char\s*\*\s*(\w+)\s*;', text):
        api.strtypes.add(m.group(1))
    for m in re.finditer(r'typedef\s+enum\s*\{([^}]*)\}\s*(\w+)\s*;', text):
        vals, nxt = [], 0
        for item in [s.strip() for s in m.group(1).split(',') if s.strip()]:
            if '=' in item:
                k, v = [s.strip() for s in item.split('=')]
                nxt = int(v, 0)
            else:
                k = item
            vals.append((k, nxt))
            nxt += 1
        api.enums[m.group(2)] = vals
    for m in re.finditer(r'PETSC_EXTERN\s+PetscErrorCode\s+(DD\w+)\s*\(([^;]*?)\)\s*;', text):
        args = [' '.join(a.split()) for a in split_args(m.group(2))]
        if args == ['void']:
            args = []
        api.functions.append((m.group(1), args))
    return api


def split_args(s):
    out, depth, cur = [], 0, ''
    for ch in s:
        if ch == '(':
            depth += 1
        elif ch == ')':
            depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur)
            cur = ''
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def read_bindings(path):
    table = {}
    with open(path) as fh:
        for line in fh:
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            words = line.split()
            opts = {}
            for w in words[1:]:
                k, _, v = w.partition('=')
                opts[k] = v if v else True
            table[words[0]] = opts
    return table


def snake(name):
    """DDTensorSetUp -> ddnn_tensor_set_up; DDTensorWriteHDF5 -> ddnn_tensor_write_hdf5"""
    words = re.findall(r'[A-Z]+[0-9]*(?![a-z])|[A-Z][a-z0-9]*', name[2:])
    return 'ddnn_' + '_'.join(w.lower() for w in words)


# ------------------------------------------------------------------------------------------------
# the default rule: each header argument type is one kind


def norm(t):
    t = re.sub(r'\s*\*\s*', ' *', t).replace('* ', '*')
    t = re.sub(r'\s*\[\s*\]', '[]', t)
    return t.strip()


def kind_of(api, t):
    t = norm(t)
    base = t.replace('const ', '').replace('*', '').replace('[]', '').strip()
    ptr = t.count('*') + t.count('[]')
    isconst = t.startswith('const ')
    if t == 'MPI_Comm':
        return ('comm', None)
    if base in api.classes:
        if ptr == 0:
            return ('obj', base)
        if t == base + ' *':
            return ('obj_out', base)
        if t == base + '[]':
            return ('obj_arr', base)
        return None
    if base in PETSC_OBJECTS and ptr == 0:
        return ('viewer' if base == 'PetscViewer' else 'pobj', base)
    if base in PETSC_OBJECTS and t == base + ' *' and base != 'PetscViewer':
        return ('pobj_out', base)
    scalars = {'PetscInt': 'int', 'PetscInt64': 'i64', 'PetscMPIInt': 'mpi', 'PetscReal': 'real', 'PetscBool': 'bool'}
    if base in scalars and ptr == 0:
        return (scalars[base], base)
    if (base in api.enums or base in EXTERNAL_ENUMS) and ptr == 0:
        return ('enum', base)
    if t in (base + ' *',) and (base in scalars or base in api.enums or base in EXTERNAL_ENUMS):
        return ((scalars[base] if base in scalars else 'enum') + '_out', base)
    if t == 'const char[]' or (base in api.strtypes and ptr == 0):
        return ('str', None)
    if t in ('const char *[]', 'const char **') or (base in api.strtypes and t == base + ' *'):
        return ('str_out', None)
    if t in ('const char *const[]', 'const char *const *'):
        return ('strarr', None)
    if t == 'const PetscInt[]':
        return ('intarr', 'PetscInt')
    if t == 'const PetscMPIInt[]':
        return ('mpiarr', 'PetscMPIInt')
    if t == 'PetscInt[]':
        return ('intarr_out', 'PetscInt')
    if t in ('const PetscInt *[]', 'const PetscInt **'):
        return ('intptr_out', 'PetscInt')
    if t == 'const void *':
        return ('values', 'in')
    if t == 'void *':
        return ('values', 'out')
    return None


class Arg:
    """one header argument and what the ABI makes of it"""

    def __init__(self, pos, kind, ctype, name):
        self.pos, self.kind, self.ctype, self.name = pos, kind, ctype, name
        self.abi = []  # ABI parameters (c declarations)
        self.abipos = 0  # position of its first ABI parameter
        self.count = None  # for arrays: the Arg of their count (or 'ins'/'cap' for an inserted one)


SHORT = {'DDPartition': 'part', 'DDTensor': 't', 'DDPrimitive': 'p', 'DDLayer': 'l', 'DDNet': 'net',
         'DDOptimizer': 'opt', 'DDDataset': 'ds', 'Vec': 'v', 'DM': 'dm', 'PetscViewer': 'viewer'}
DEFAULT_COUNT = {'DDTensor': 'DDTensorGetOrder', 'DDPartition': 'DDPartitionGetOrder'}


class Skip(Exception):
    pass


class Function:
    def __init__(self, api, name, ctypes, opts):
        self.name, self.opts = name, opts
        self.abiname = opts.get('abi', snake(name))
        self.fname = opts.get('fortran', name)
        self.null = set(int(i) for i in str(opts.get('null', '')).split(',') if i)
        self.nullstr = set(int(i) for i in str(opts.get('nullstr', '')).split(',') if i)
        self.args = []
        used = {}
        for i, t in enumerate(ctypes, 1):
            k = kind_of(api, t)
            if k is None:
                raise Skip('argument %d (%s) has no default conversion' % (i, t))
            base = {'comm': 'comm', 'int': 'n', 'i64': 'i', 'mpi': 'r', 'real': 'a', 'bool': 'flg', 'enum': 'e',
                    'str': 's', 'str_out': 's', 'strarr': 'names', 'intarr': 'a', 'mpiarr': 'r', 'intarr_out': 'a',
                    'intptr_out': 'a', 'values': 'values', 'int_out': 'n', 'i64_out': 'i', 'mpi_out': 'r',
                    'real_out': 'a', 'bool_out': 'flg', 'enum_out': 'e', 'obj_arr': 'xs'}.get(k[0])
            if base is None:
                base = SHORT.get(k[1], k[1][2:].lower())
            used[base] = used.get(base, 0) + 1
            self.args.append(Arg(i, k[0], k[1], base))
        seen = {}
        for a in self.args:  # distinct names: t1, t2, ...
            if used[a.name] > 1:
                seen[a.name] = seen.get(a.name, 0) + 1
                a.name = a.name + str(seen[a.name])
        self.first = self.args[0] if self.args and self.args[0].kind == 'obj' else None
        self.destroy = name.endswith('Destroy') and len(self.args) == 1 and self.args[0].kind == 'obj_out'
        self.layout()

    def layout(self):
        """ABI parameters of each argument; counts of arrays"""
        args, abi = self.args, []
        i = 0
        while i < len(args):
            a = args[i]
            if a.kind in ('intarr', 'mpiarr', 'obj_arr', 'strarr', 'intarr_out', 'intptr_out'):
                grp = [a]
                while i + len(grp) < len(args) and args[i + len(grp)].kind == a.kind:
                    grp.append(args[i + len(grp)])
                prev = args[i - 1] if i > 0 else None
                if a.kind in ('intarr_out', 'intptr_out'):
                    getter = self.opts.get('count') or (self.first and DEFAULT_COUNT.get(self.first.ctype))
                    if not getter:
                        raise Skip('output array without a count: give count= in bindings.txt')
                    self.getter = getter
                    abi.append(('ddnn_int cap', None))
                    for g in grp:
                        g.count = 'cap'
                elif prev is not None and prev.kind == 'int' and prev.count is None and getattr(prev, 'iscount', False) is False:
                    prev.iscount = True
                    for g in grp:
                        g.count = prev
                else:
                    getter = self.opts.get('count')
                    if not getter or a.kind != 'intarr':
                        raise Skip('array without a length argument: give count= in bindings.txt')
                    self.getter = getter
                    abi.append(('ddnn_int nent', None))
                    for g in grp:
                        g.count = 'ins'
                for g in grp:
                    g.abipos = len(abi) + 1
                    cdecl = {'intarr': 'const ddnn_int %s[]', 'mpiarr': 'const int %s[]', 'obj_arr': 'const ddnn_handle %s[]',
                             'strarr': 'const char *const %s[]', 'intarr_out': 'ddnn_int %s[]', 'intptr_out': 'ddnn_int %s[]'}[g.kind]
                    abi.append((cdecl % g.name, g))
                i += len(grp)
                continue
            a.abipos = len(abi) + 1
            k = a.kind
            if k == 'comm':
                abi.append(('ddnn_fint %s' % a.name, a))
            elif k in ('obj', 'viewer', 'pobj'):
                abi.append((('ddnn_handle %s' if k == 'obj' else 'ddnn_petsc_handle %s') % a.name, a))
            elif k == 'obj_out':
                abi.append(('ddnn_handle *%s' % a.name, a))
            elif k == 'pobj_out':
                abi.append(('ddnn_petsc_handle *%s' % a.name, a))
            elif k == 'int':
                abi.append(('ddnn_int %s' % a.name, a))
            elif k == 'i64':
                abi.append(('int64_t %s' % a.name, a))
            elif k in ('mpi', 'bool', 'enum'):
                abi.append(('int %s' % a.name, a))
            elif k == 'real':
                abi.append(('double %s' % a.name, a))
            elif k in ('int_out', 'i64_out'):
                abi.append(('ddnn_int *%s' % a.name, a))
            elif k in ('mpi_out', 'bool_out', 'enum_out'):
                abi.append(('int *%s' % a.name, a))
            elif k == 'real_out':
                abi.append(('double *%s' % a.name, a))
            elif k == 'str':
                abi.append(('const char *%s' % a.name, a))
                abi.append(('ddnn_int %slen' % a.name, None))
            elif k == 'str_out':
                abi.append(('char *%s' % a.name, a))
                abi.append(('ddnn_int %slen' % a.name, None))
            elif k == 'values':
                if self.opts.get('values') not in ('global', 'root') or not self.first or self.first.ctype != 'DDTensor':
                    raise Skip('void * values: give values= in bindings.txt')
                abi.append(('int dtype', None))
                a.abipos = len(abi) + 1
                abi.append((('const void *%s' if a.ctype == 'in' else 'void *%s') % a.name, a))
                abi.append(('ddnn_int count', None))
            i += 1
        self.abi = abi

    def prototype(self):
        return 'int %s(%s)' % (self.abiname, ', '.join(d for d, _ in self.abi) or 'void')

    # -------------------------------------------------------------------------------------------- C shim
    def shim(self):
        L, decl, call, after = [], [], [], []
        name = self.name
        if self.destroy:
            a = self.args[0]
            return self.man() + '%s\n{\n  return Destroy<%s>(%s, %s);\n}\n' % (self.prototype(), a.ctype, a.name, name)
        for a in self.args:
            k, v, p = a.kind, a.name + '_', a.abipos
            if k == 'comm':
                decl.append(('MPI_Comm', v))
                L.append('PetscCall(Comm(%s, &%s));' % (a.name, v))
            elif k in ('obj', 'pobj'):
                decl.append((a.ctype, v))
                L.append('PetscCall(Get(%s, %d, &%s%s));' % (a.name, p, v, ', true' if a.pos in self.null else ''))
            elif k == 'viewer':
                decl.append(('PetscViewer', v))
                obj = '(PetscObject)%s_' % self.first.name if self.first and self.first.pos < a.pos else 'NULL'
                L.append('PetscCall(GetViewer(%s, %s, %d, &%s));' % (a.name, obj, p, v))
            elif k in ('obj_out', 'pobj_out'):
                decl.append((a.ctype, v))
                L.append('PetscCall(Out(%s, %d));' % (a.name, p))
                after.append('*%s = (intptr_t)%s;' % (a.name, v))
                call.append('&' + v)
                continue
            elif k == 'int':
                decl.append(('PetscInt', v))
                L.append('PetscCall(Int(%s, %d, &%s));' % (a.name, p, v))
            elif k == 'i64':
                decl.append(('PetscInt64', v))
                L.append('%s = (PetscInt64)%s;' % (v, a.name))
            elif k == 'mpi':
                decl.append(('PetscMPIInt', v))
                L.append('%s = (PetscMPIInt)%s;' % (v, a.name))
            elif k == 'real':
                decl.append(('PetscReal', v))
                L.append('%s = (PetscReal)%s;' % (v, a.name))
            elif k == 'bool':
                decl.append(('PetscBool', v))
                L.append('%s = %s ? PETSC_TRUE : PETSC_FALSE;' % (v, a.name))
            elif k == 'enum':
                decl.append((a.ctype, v))
                L.append('PetscCall(Enum(%s, %d, "%s", %d));' % (a.name, self.nenum(a.ctype), a.ctype, p))
                L.append('%s = (%s)%s;' % (v, a.ctype, a.name))
            elif k.endswith('_out') and k[:-4] in ('int', 'i64', 'mpi', 'real', 'bool', 'enum'):
                ct = {'int': 'PetscInt', 'i64': 'PetscInt64', 'mpi': 'PetscMPIInt', 'real': 'PetscReal', 'bool': 'PetscBool'}.get(k[:-4], a.ctype)
                decl.append((ct, v))
                L.append('PetscCall(Out(%s, %d));' % (a.name, p))
                conv = {'bool': '%s ? 1 : 0', 'enum': '(int)%s', 'real': '(double)%s'}.get(k[:-4], '%s')
                after.append('*%s = %s;' % (a.name, conv % v))
                call.append('&' + v)
                continue
            elif k == 'str':
                decl.append(('Str', v))
                L.append('PetscCall(%s.Set(%s, %slen, %d%s));' % (v, a.name, a.name, p, ', true' if a.pos in self.nullstr else ''))
                call.append(v + '.c()')
                continue
            elif k == 'str_out':
                decl.append(('const char *', v))
                L.append('PetscCall(Out(%s, %d));' % (a.name, p))
                after.append('PetscCall(PutStr(%s, %s, %slen, %d));' % (v, a.name, a.name, p))
                call.append('&' + v)
                continue
            elif k in ('intarr', 'mpiarr', 'obj_arr', 'strarr'):
                n = 'nent' if a.count == 'ins' else a.count.name
                if a.count == 'ins' and a is self.first_of(a):
                    decl.append(('PetscInt', 'need_'))
                    L.append('PetscCall(%s(%s_, &need_));' % (self.getter, self.first.name))
                    L.append('PetscCheck(nent == need_, PETSC_COMM_SELF, PETSC_ERR_ARG_SIZ, "Arrays of %%" PetscInt64_FMT " entries (argument %d) where %%" PetscInt_FMT " are needed", (PetscInt64)nent, need_);' % (a.abipos - 1))
                if k == 'intarr':
                    decl.append(('std::vector<PetscInt>', v))
                    L.append('PetscCall(IntArray(%s, %s, %s, %d, %s));' % (n, a.name, 'INT64_MAX', p, v))
                elif k == 'mpiarr':
                    decl.append(('std::vector<PetscMPIInt>', v))
                    L.append('PetscCall(MPIIntArray(%s, %s, %d, %s));' % (n, a.name, p, v))
                elif k == 'obj_arr':
                    decl.append(('std::vector<%s>' % a.ctype, v))
                    L.append('PetscCall(GetArray(%s, %s, %d, %s%s));' % (n, a.name, p, v, ', true' if a.pos in self.null else ''))
                else:
                    decl.append(('std::vector<std::string>', v + 'keep'))
                    decl.append(('std::vector<const char *>', v))
                    L.append('PetscCall(StrArray(%s, %s, %d, %skeep, %s));' % (n, a.name, p, v, v))
                call.append(v + '.data()')
                continue
            elif k in ('intarr_out', 'intptr_out'):
                if a is self.first_of(a):
                    decl.append(('PetscInt', 'need_'))
                    L.append('PetscCall(%s(%s_, &need_));' % (self.getter, self.first.name))
                if k == 'intarr_out':
                    decl.append(('std::vector<PetscInt>', v))
                    L.append('%s.resize((size_t)need_ + 1);' % v)
                    call.append(v + '.data()')
                    after.append('PetscCall(PutInts(need_, %s.data(), cap, %s, %d));' % (v, a.name, p))
                else:
                    decl.append(('const PetscInt *', v))
                    call.append('&' + v)
                    after.append('PetscCall(PutInts(need_, %s, cap, %s, %d));' % (v, a.name, p))
                continue
            elif k == 'values':
                t = self.first.name + '_'
                if self.opts['values'] == 'root':
                    root = [b for b in self.args if b.kind == 'mpi'][0].name + '_'
                    decl.append(('PetscMPIInt', 'rank_'))
                    L.append('PetscCallMPI(MPI_Comm_rank(PetscObjectComm((PetscObject)%s), &rank_));' % t)
                    L.append('PetscCall(CheckGlobalArrayAll(%s, rank_ == %s, dtype, %s, count, %d));' % (t, root, a.name, p))
                else:
                    L.append('PetscCall(CheckGlobalArray(%s, dtype, %s, count, %d));' % (t, a.name, p))
                call.append(a.name)
                continue
            call.append(v)
        w = max([len(d) for d, _ in decl] + [0])
        body = ''.join('  %-*s %s;\n' % (w, d, n) for d, n in decl)
        if decl:
            body += '\n'
        body += '  PetscFunctionBegin;\n'
        body += ''.join('  %s\n' % s for s in L)
        body += '  PetscCall(%s(%s));\n' % (name, ', '.join(call))
        body += ''.join('  %s\n' % s for s in after)
        body += '  PetscFunctionReturn(PETSC_SUCCESS);\n'
        return self.man() + '%s\nDD_CXX_TRY\n{\n%s}\nDD_CXX_CATCH\n' % (self.prototype(), body)

    def first_of(self, a):
        return [b for b in self.args if b.kind == a.kind and b.count == a.count][0]

    def nenum(self, e):
        return EXTERNAL_ENUMS[e] if e in EXTERNAL_ENUMS else len(self.api.enums[e])

    def man(self):
        notes = []
        if any(a.kind == 'str' for a in self.args):
            notes.append('strings are (pointer, length) pairs')
        if any(a.kind in ('intarr_out', 'intptr_out') for a in self.args):
            notes.append('arrays out are copied into arrays of capacity cap')
        if self.null:
            notes.append('arguments %s may be 0' % ', '.join(str(i) for i in sorted(self.null)))
        return '/*@C\n  %s - ABI of `%s()`%s (generated by c_api/generate.py)\n\n  Level: developer\n@*/\n' % (
            self.abiname, self.name, ': ' + '; '.join(notes) if notes else '')

    # -------------------------------------------------------------------------------------------- Fortran
    def fortran(self, hascls):
        """the subroutine(s) of module ddnn: [(specific name, text)] and the generic name or None"""
        vals = [a for a in self.args if a.kind == 'values']
        single = [a for a in self.args if a.kind == 'intarr' and isinstance(a.count, Arg) and
                  sum(1 for b in self.args if b.count is a.count) == 1]
        if vals:
            return [(self.fname + '4', self.fsub(self.fname + '4', 'c_float')), (self.fname + '8', self.fsub(self.fname + '8', 'c_double'))], self.fname
        if len(single) == 1 and 'fortran' not in self.opts:
            return [(self.fname + 'A', self.fsub(self.fname + 'A')), (self.fname + 'S', self.fsub(self.fname + 'S', scalar=single[0]))], self.fname
        return [(self.fname, self.fsub(self.fname))], None

    def fsub(self, sname, real=None, scalar=None):
        dummies, decls, pre, post, actual = [], [], [], [], []
        locs = []
        for a in self.args:
            n, k = a.name, a.kind
            # Fortran names are case-insensitive: keep them apart from the subroutine's and the helpers'
            dummies.append(n)
            if k == 'comm':
                decls.append('MPI_Comm, intent(in) :: %s' % n)
                actual.append('int(%s, c_int)' % n)
            elif k == 'obj':
                decls.append('type(t%s), intent(in) :: %s' % (a.ctype, n))
                actual.append('%s%%v' % n)
            elif k in ('pobj', 'viewer'):
                decls.append('%s, intent(in) :: %s' % (a.ctype, n))
                actual.append('int(%s%%v, c_intptr_t)' % n)
            elif k == 'obj_out':
                decls.append('type(t%s), intent(inout) :: %s' % (a.ctype, n))
                actual.append('%s%%v' % n)
            elif k == 'pobj_out':
                decls.append('%s, intent(inout) :: %s' % (a.ctype, n))
                locs.append('integer(c_intptr_t) :: %s_c' % n)
                actual.append('%s_c' % n)
                post.append('if (ierr == 0) %s%%v = %s_c' % (n, n))
            elif k in ('int', 'i64', 'mpi', 'real', 'bool', 'enum'):
                ft = {'int': 'PetscInt', 'i64': 'PetscInt64', 'mpi': 'PetscMPIInt', 'real': 'PetscReal', 'bool': 'PetscBool'}.get(k)
                if k == 'enum':
                    ft = a.ctype if a.ctype in EXTERNAL_ENUMS else 'PetscEnum'
                decls.append('%s, intent(in) :: %s' % (ft, n))
                actual.append({'int': 'int(%s, c_int64_t)', 'i64': 'int(%s, c_int64_t)', 'mpi': 'int(%s, c_int)', 'real': 'real(%s, c_double)',
                               'bool': 'merge(1_c_int, 0_c_int, %s)', 'enum': 'int(%s, c_int)'}[k] % n)
            elif k.endswith('_out') and k[:-4] in ('int', 'i64', 'mpi', 'real', 'bool', 'enum'):
                b = k[:-4]
                ft = {'int': 'PetscInt', 'i64': 'PetscInt64', 'mpi': 'PetscMPIInt', 'real': 'PetscReal', 'bool': 'PetscBool', 'enum': 'PetscEnum'}[b]
                ct = {'int': 'integer(c_int64_t)', 'i64': 'integer(c_int64_t)', 'real': 'real(c_double)'}.get(b, 'integer(c_int)')
                decls.append('%s, intent(out) :: %s' % (ft, n))
                locs.append('%s :: %s_c' % (ct, n))
                actual.append('%s_c' % n)
                post.append(('%s = %s_c /= 0' if b == 'bool' else '%s = %s_c') % (n, n) if b in ('bool', 'real') else '%s = int(%s_c, kind(%s))' % (n, n, n))
            elif k == 'str':
                decls.append('character(len=*), intent(in) :: %s' % n)
                actual += [n, 'len_trim(%s, kind=c_int64_t)' % n]
            elif k == 'str_out':
                decls.append('character(len=*), intent(out) :: %s' % n)
                locs.append('character(kind=c_char) :: %s_c(len(%s) + 1)' % (n, n))
                actual += ['%s_c' % n, 'size(%s_c, kind=c_int64_t)' % n]
                post.append('call FromCString(%s_c, %s)' % (n, n))
            elif k in ('intarr', 'mpiarr', 'obj_arr', 'strarr'):
                if scalar is a:
                    decls.append('PetscInt, intent(in) :: %s' % n)
                    actual.append('[int(%s, c_int64_t)]' % n)
                    continue
                ft = {'intarr': 'PetscInt', 'mpiarr': 'PetscMPIInt', 'obj_arr': 'type(t%s)' % a.ctype, 'strarr': 'character(len=*)'}[k]
                decls.append('%s, intent(in) :: %s(:)' % (ft, n))
                if a.count == 'ins':
                    grp = [b for b in self.args if b.count == 'ins']
                    if a is grp[0]:
                        actual.append('int(min(%s), c_int64_t)' % ', '.join('size(%s)' % b.name for b in grp) if len(grp) > 1 else 'size(%s, kind=c_int64_t)' % n)
                    cnt = 'size(%s)' % n
                else:
                    cnt = 'int(%s)' % a.count.name
                ct = {'intarr': 'integer(c_int64_t)', 'mpiarr': 'integer(c_int)', 'obj_arr': 'integer(c_intptr_t)'}.get(k)
                if ct:
                    # entries beyond size(a) (n > size(a)) are 0: a null handle, reported by the ABI
                    locs.append('%s :: %s_c(max(size(%s), %s, 1))' % (ct, n, n, cnt))
                    pre.append('%s_c = 0' % n)
                    pre.append('%s_c(1:size(%s)) = %s' % (n, n, n + '%v' if k == 'obj_arr' else n))
                    actual.append('%s_c' % n)
                else:
                    locs.append('character(kind=c_char), allocatable, target :: %s_k(:, :)' % n)
                    locs.append('type(c_ptr), allocatable :: %s_c(:)' % n)
                    pre.append('call ToCStrings(%s, %s, %s_k, %s_c)' % (n, cnt, n, n))
                    actual.append('%s_c' % n)
            elif k in ('intarr_out', 'intptr_out'):
                grp = [b for b in self.args if b.kind == k]
                if a is grp[0]:
                    actual.append('int(min(%s), c_int64_t)' % ', '.join('size(%s)' % b.name for b in grp) if len(grp) > 1 else 'size(%s, kind=c_int64_t)' % n)
                decls.append('PetscInt, intent(out) :: %s(:)' % n)
                locs.append('integer(c_int64_t) :: %s_c(max(size(%s), 1))' % (n, n))
                pre.append('%s_c = 0' % n)
                actual.append('%s_c' % n)
                post.append('%s = int(%s_c(1:size(%s)), kind(%s))' % (n, n, n, n))
            elif k == 'values':
                decls.append('real(%s), intent(%s) :: %s(:)' % (real, 'in' if a.ctype == 'in' else 'inout', n))
                locs.append('real(%s) :: %s_d(1)' % (real, n))
                actual += ['int(%s, c_int)' % ('DD_FLOAT32' if real == 'c_float' else 'DD_FLOAT64'), n, 'size(%s, kind=c_int64_t)' % n]
        decls.append('PetscErrorCode, intent(out) :: ierr')
        body = ['  ! %s - %s (generated from the header by c_api/generate.py)' % (self.name, self.abiname)]
        body.append('  subroutine %s(%s)' % (sname, ', '.join(dummies + ['ierr'])))
        body += ['    ' + d for d in decls + locs]
        body += ['    ' + s for s in pre]
        callline = '    ierr = %s(%s)' % (self.abiname, ', '.join(actual))
        if any(a.kind == 'values' for a in self.args):
            v = [a for a in self.args if a.kind == 'values'][0].name
            # a zero-size array may have no address: pass a dummy then
            body.append('    if (size(%s) > 0) then' % v)
            body.append('  ' + callline)
            body.append('    else')
            body.append('  ' + callline.replace(', %s, size(%s, kind=c_int64_t)' % (v, v), ', %s_d, 0_c_int64_t' % v))
            body.append('    end if')
        else:
            body.append(callline)
        if post:
            body.append('    if (ierr /= 0) return')
            body += ['    ' + s for s in post]
        body.append('  end subroutine %s' % sname)
        return '\n'.join(body) + '\n'


# ------------------------------------------------------------------------------------------------
# module ddnn_capi: one interface per ABI prototype (generated or hand-written)


def finterface(proto):
    m = re.match(r'int\s+(ddnn_\w+)\s*\((.*)\)', proto)
    name, params = m.group(1), [p.strip() for p in m.group(2).split(',')]
    if params == ['void']:
        params = []
    names, decls = [], []
    for p in params:
        pm = re.match(r'(.*?)(\w+)\s*(\[\])?$', p)
        t, n, arr = ' '.join(pm.group(1).split()), pm.group(2), pm.group(3)
        names.append(n)
        ptr = t.endswith('*')
        base = t.replace('const', '').replace('*', '').strip()
        if 'char' in base and (arr or ptr) and t.count('*') + (1 if arr else 0) >= 2 or (base == 'char' and 'const' in t and t.endswith('*const')):
            decls.append('type(c_ptr) :: %s(*)' % n)
            continue
        if base == 'char':
            decls.append('character(kind=c_char) :: %s(*)' % n)
            continue
        if base == 'void':
            decls.append('type(*) :: %s(*)' % n)
            continue
        ft = {'ddnn_handle': 'integer(c_intptr_t)', 'ddnn_petsc_handle': 'integer(c_intptr_t)', 'ddnn_fint': 'integer(c_int)',
              'ddnn_int': 'integer(c_int64_t)', 'int64_t': 'integer(c_int64_t)', 'int': 'integer(c_int)', 'double': 'real(c_double)'}[base]
        if arr:
            decls.append('%s :: %s(*)' % (ft, n))
        elif ptr:
            decls.append('%s :: %s' % (ft, n))
        else:
            decls.append('%s, value :: %s' % (ft, n))
    out = ['    function %s(%s) bind(C, name=\'%s\') result(ierr)' % (name, ', '.join(names), name), '      import', '      integer(c_int) :: ierr']
    out += ['      ' + d for d in decls]
    out.append('    end function')
    return '\n'.join(out) + '\n'


def hand_prototypes(path):
    with open(path) as fh:
        text = fh.read()
    return [' '.join(m.group(0).split()) for m in re.finditer(r'^int\s+ddnn_\w+\s*\([^)]*\)', text, re.M)]


# ------------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    ap.add_argument('--include', action='append', required=True)
    ap.add_argument('--bindings', required=True)
    ap.add_argument('--hand-c', required=True)
    ap.add_argument('--hand-f', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--out-header', help='directory of ddnn_capi_functions.h (default: --out)')
    ap.add_argument('--strict', action='store_true', help='fail on a function the default rule cannot bind and bindings.txt does not list')
    o = ap.parse_args()

    api = read_headers(o.include)
    table = read_bindings(o.bindings)
    names = set(n for n, _ in api.functions)
    for n in table:
        if n not in names:
            sys.exit('generate.py: %s: %s is not a function of the headers' % (o.bindings, n))
    funcs, skipped = [], []
    for name, ctypes in api.functions:
        opts = table.get(name, {})
        if opts.get('skip') or opts.get('hand'):
            skipped.append('%s: %s' % (name, 'bound by hand' if opts.get('hand') else 'skip (bindings.txt)'))
            continue
        try:
            f = Function(api, name, ctypes, opts)
            f.api = api
            funcs.append(f)
        except Skip as e:
            skipped.append('%s: not bound: %s' % (name, e))
            if o.strict:
                sys.exit('generate.py: %s: %s' % (name, e))
    hand = hand_prototypes(o.hand_c)
    hand_names = set(re.match(r'int\s+(\w+)', p).group(1) for p in hand)
    for f in funcs:
        if f.abiname in hand_names:
            sys.exit('generate.py: %s is generated for %s and written by hand in %s' % (f.abiname, f.name, o.hand_c))

    os.makedirs(o.out, exist_ok=True)

    def write(name, text):
        outdir = o.out_header if (o.out_header and name.endswith('.h')) else o.out
        os.makedirs(outdir, exist_ok=True)
        with open(os.path.join(outdir, name), 'w') as fh:
            fh.write(text)

    banner = 'generated by c_api/generate.py from the public headers (include/) and c_api/bindings.txt: do not edit'
    # header
    h = ['/* ddnn_capi_functions.h - the entry points of the binding ABI (%s); included by ddnn_capi.h */' % banner]
    h.append('/* bound by hand (c_api/capi_hand.cxx) */')
    h += [p + ';' for p in hand]
    h.append('/* generated from the public headers */')
    h += [f.prototype() + ';' for f in funcs]
    write('ddnn_capi_functions.h', '\n'.join(h) + '\n')
    # class ids
    c = ['/* capi_classes.hpp - %s */' % banner]
    for cls, cid in sorted(api.classes.items()):
        c.append('DDCAPI_CLASS(%s, %s, "%s");' % (cls, cid, cls))
    write('capi_classes.hpp', '\n'.join(c) + '\n')
    # shims
    s = ['/*\n  capi_generated.cxx - the binding ABI shims (%s).\n  Each converts its arguments (checked handles, PetscInt overflow, enumeration ranges, (pointer,\n  length) strings) and calls the C function named in its man page.\n*/' % banner,
         '#include "capi.hpp"', '', 'using namespace ddcapi;', '']
    s += [f.shim() for f in funcs]
    write('capi_generated.cxx', '\n'.join(s))
    # module ddnn_capi
    m = ['!\n!  ddnn_capi.F90 - module ddnn_capi: a bind(C) interface for each entry point of the binding ABI,\n!  ddnn_capi.h (%s).\n!  Handles are integer(c_intptr_t), integers integer(c_int64_t), strings (characters, length).\n!' % banner,
         'module ddnn_capi', '  use, intrinsic :: iso_c_binding', '  implicit none', '  public', '',
         '  ! the DDNN_CAPI_VERSION of ddnn_capi.h these interfaces follow (ddnn_capi_version() gives the library\'s)',
         '  integer(c_int), parameter :: DDNN_CAPI_INTERFACE_VERSION = 1', '', '  interface']
    m += [finterface(p) for p in hand]
    m += [finterface(f.prototype()) for f in funcs]
    m += ['  end interface', 'end module ddnn_capi', '']
    write('ddnn_capi.F90', '\n'.join(m))
    # module ddnn
    with open(o.hand_f) as fh:
        handf = fh.read()
    spec, _, contains = handf.partition('!@contains')
    spec = spec.split('!@spec', 1)[-1]
    d = ['!\n!  ddnn.F90 - module ddnn: ddnn for Fortran, beside `use petsc` (%s).\n!' % banner,
         '!  Every subroutine has the name and the arguments of the C function it binds, plus a trailing',
         '!  PetscErrorCode ierr: PetscCall(DDLayerForward(layer, x, y, ierr)). Objects are derived types',
         '!  holding the C pointer (type(tDDTensor) & co., component v: 0 until created and after Destroy).',
         '!  Arrays whose length C takes as an argument are passed the same way (a scalar is accepted where',
         '!  C takes one array and its length); arrays C returns are copied into the array passed; arrays of',
         '!  values come in real(4) and real(8); strings lose their trailing blanks.',
         '!  The hand-written part (fortran/ddnn_hand.F90) is spliced in where marked.', '!',
         '#include "petsc/finclude/petscsys.h"', '#include "petsc/finclude/petscvec.h"', '#include "petsc/finclude/petscdm.h"', '',
         'module ddnn', '  use, intrinsic :: iso_c_binding', '  use petscdm', '  use ddnn_capi', '  implicit none', '  private', '']
    d.append('  ! object types, and "no object" for arguments C allows to be NULL')
    for cls in sorted(api.classes):
        d += ['  type, public :: t%s' % cls, '    integer(c_intptr_t) :: v = 0', '  end type t%s' % cls]
        d.append('  type(t%s), parameter, public :: DD_NULL_%s = t%s(0)' % (cls, cls[2:].upper(), cls))
    d.append('')
    d.append('  ! enumerations (the values of the C enums), constants and type names')
    for e, vals in api.enums.items():
        d.append('  PetscEnum, parameter, public :: %s' % ', '.join('%s = %d' % kv for kv in vals) + ' ! ' + e)
    for k, v in api.intconsts:
        d.append('  PetscInt, parameter, public :: %s = %d' % (k, v))
    for k, v in api.strconsts:
        d.append("  character(len=*), parameter, public :: %s = '%s'" % (k, v))
    d.append('')
    subs, generics = [], []
    for f in funcs:
        if f.opts.get('fortran') == 'hand':
            continue
        specs, generic = f.fortran(api.classes)
        if generic:
            d.append('  public :: %s' % generic)
            d.append('  interface %s' % generic)
            d.append('    module procedure %s' % ', '.join(n for n, _ in specs))
            d.append('  end interface %s' % generic)
        elif 'fortran' not in f.opts:
            d.append('  public :: %s' % specs[0][0])
        subs += [t for _, t in specs]
    d.append('')
    d.append('  ! ---- hand-written declarations (fortran/ddnn_hand.F90) ----')
    d.append(spec.rstrip())
    d += ['', 'contains', '']
    d += subs
    d.append('  ! ---- hand-written subroutines (fortran/ddnn_hand.F90) ----')
    d.append(contains.rstrip())
    d += ['', 'end module ddnn', '']
    write('ddnn.F90', '\n'.join(d))
    write('ddnn_capi_skipped.txt', '\n'.join(skipped) + '\n')
    print('generate.py: %d functions bound by the generator, %d by hand, %d not bound (%s)' % (
        len(funcs), len(hand), sum(1 for x in skipped if 'by hand' not in x), os.path.join(o.out, 'ddnn_capi_skipped.txt')))


if __name__ == '__main__':
    main()
