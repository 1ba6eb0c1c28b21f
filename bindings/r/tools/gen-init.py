# gen-init.py — writes src/init.c: the registration of every "SEXP C_name(...) {" in src/*.c.
# Run it after adding an entry point: /usr/bin/python3 bindings/r/tools/gen-init.py
import re,glob,os
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'src'))
sigs=[]
for f in sorted(glob.glob('*.c')):
    if f=='init.c': continue
    for m in re.finditer(r'^SEXP (C_[a-z_0-9]+)\(([^)]*)\) *\{', open(f).read(), re.M):
        name,args=m.group(1),m.group(2)
        n=0 if args.strip()=='void' else args.count(',')+1
        sigs.append((name,n,args))
out='''/*
 * init.c — registers the package's .Call entry points and ALTREP classes (R_init_suiro).
 */
#include <R_ext/Visibility.h>

#include "rsuiro.h"

void rs_codec_init(void);
void rs_pool_init(void);
void rs_func_init(void);
void rs_worker_init(void);
void rs_map_init(void);

'''
for name,n,args in sigs:
    out+='SEXP %s(%s);\n'%(name,args)
out+='\n#define CALLDEF(name, n) { #name, (DL_FUNC)(void (*)(void))&name, n }\nstatic const R_CallMethodDef calls[] = {\n'
for name,n,args in sigs:
    out+='  CALLDEF(%s, %d),\n'%(name,n)
out+='''  { NULL, NULL, 0 }
};

/* The engine's diagnostics (a worker that cannot join its pool says why) through R's error
 * stream, as R CMD check wants of compiled code. */
static void rs_diag(void *ud, const char *msg, size_t len) {
  REprintf("%.*s\\n", (int)len, msg);
}

/* The package is compiled with hidden visibility (Makevars: $(C_VISIBILITY)): R finds only this. */
void attribute_visible R_init_suiro(DllInfo *dll) {
  R_registerRoutines(dll, NULL, calls, NULL, NULL);
  R_useDynamicSymbols(dll, FALSE);
  R_forceSymbols(dll, TRUE);
  suiro_set_diag(rs_diag, NULL);
  rs_codec_init();
  rs_pool_init();
  rs_func_init();
  rs_worker_init();
  rs_map_init();
  rs_views_init(dll);
}
'''
open('init.c','w').write(out)
