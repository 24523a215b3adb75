// An experiment behind docs/benchmarks.md, "What makes the energy drift" (issue 47); not part of
// banyan's build. Block time steps on a Hernquist sphere (virial units, as banyan's --ic hernquist: a = 1/3, cut at
// 100 a; isotropic f(E) of Hernquist 1990) with direct summation in double precision, so that neither a tree's
// force errors nor float32 blur what the step choice does.
//   scheme quinn: the hierarchical kick-drift-kick of Quinn et al. (1997), as banyan's Simulation::block_step;
//   scheme hold:  hierarchical force splitting (Pelupessy, Janes & Portegies Zwart 2012; GADGET-4's
//                 HIERARCHICAL_GRAVITY): each pair is kicked with the step of its slower member.
//   rung rules: gadget   dt_i = sqrt(2 eta eps / |a|) at the step's start (banyan's today)
//               min      the step must fit the criterion at both ends (time symmetric, Makino et al. 2006 for
//                        block steps), the end's |a| extrapolated linearly from the particle's last two |a|
//               jerk     the same, the end's vector a extrapolated from the last two forces
//               tidal    the same, the end's a = a + T dx, T the tidal tensor summed exactly at the start
//               oracle   the same, the end's |a| summed exactly at the predicted end position (others frozen)
//               oracle3  as oracle, the step's middle checked too
//               radius   min, with a smooth function of the radius as the criterion (exactly predictable)
//               frozen   the first rungs kept; sharedK: every particle on rung K; index: rung = index mod 5, fixed
//               tn       dt = ETA / sqrt(|T|), T the tidal tensor at the start (Grudic & Hopkins 2020); tnsym: at
//                        both ends (the end's T summed at the predicted end); tnmix: the smaller of tn's and
//                        GADGET's step (GADGET's eta from env ETA_G, default 0.025)
// Environment: REVERSE=1 runs to T_END, reverses the velocities and runs back, and prints how far from the start the
// particles end (a time-symmetric scheme returns to round-off); CHECK=1 counts the rung choices that the reversed
// run, from the state where a particle's step ends, would make otherwise; MARGIN=f skips the oracle rules' probe
// where the start's criterion holds even at f |a| (banyan's bn_block_probe_needed uses f = 16); DT=x sets the longest
// step (default 1/4); BOOST=V moves the whole sphere along x at V (a Galilean boost); MOVING=1 lets the oracle rules'
// probes see the other particles drifted to the probed time (x + v h) instead of where they are; FRAME=k moves the
// probed particle relative to the mass-weighted mean velocity of its k nearest particles (a local frame); BLOCKFRAME=B
// to that of its block of B particles in Morton order (banyan's frame: the groups of the tree order).
// Build and run (prints dE/E every 10 time units and a RESULT line, with the pairs summed for forces and, apart, for
// the oracle rules' probes at predicted positions):
//   g++ -O3 -march=native -fopenmp -o block_step_rules scripts/experiments/block_step_rules.cpp
//   OMP_NUM_THREADS=2 ./block_step_rules N SCHEME RULE T_END [ETA]      e.g. 2048 quinn oracle3 50
//   REVERSE=1 OMP_NUM_THREADS=2 ./block_step_rules 2048 quinn index 1
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include <algorithm>
using namespace std;
struct V {
    double x = 0, y = 0, z = 0;
};
static int N;
static double EPS2, ETA, EPS, DT, ETA_G = 0.025;
static vector<V> X, Vv, A, Apv;
static vector<double> M, Aprev;
static vector<int> R;
static int MAXR = 12;
static long long pair_count = 0, probe_count = 0; // pairs summed for forces, and for the rules' probes
// force on sinks (indices) from sources (indices)
static void forces(const vector<int>& sinks, const vector<int>& srcs, vector<V>& out)
{
    out.assign(sinks.size(), V{});
    vector<double> sx(srcs.size()), sy(srcs.size()), sz(srcs.size()), sm(srcs.size());
    for (size_t k = 0; k < srcs.size(); ++k)
        sx[k] = X[srcs[k]].x, sy[k] = X[srcs[k]].y, sz[k] = X[srcs[k]].z, sm[k] = M[srcs[k]];
    const size_t ns = srcs.size();
#pragma omp parallel for schedule(dynamic, 16)
    for (size_t q = 0; q < sinks.size(); ++q) {
        const V p = X[sinks[q]];
        double ax = 0, ay = 0, az = 0;
#pragma omp simd reduction(+ : ax, ay, az)
        for (size_t k = 0; k < ns; ++k) {
            double dx = sx[k] - p.x, dy = sy[k] - p.y, dz = sz[k] - p.z;
            double r2 = dx * dx + dy * dy + dz * dz + EPS2;
            double ir = 1.0 / sqrt(r2);
            double f = sm[k] * ir * ir * ir;
            ax += f * dx, ay += f * dy, az += f * dz;
        }
        out[q] = V{ax, ay, az};
    }
    pair_count += (long long)sinks.size() * (long long)srcs.size();
}
static double BOOST = 0; // env BOOST: below
static double energy()   // in the frame that moves with the boost
{
    double k = 0, w = 0;
#pragma omp parallel for reduction(+ : k, w) schedule(dynamic, 16)
    for (int i = 0; i < N; ++i) {
        const double vx = Vv[i].x - BOOST;
        k += 0.5 * M[i] * (vx * vx + Vv[i].y * Vv[i].y + Vv[i].z * Vv[i].z);
        for (int j = i + 1; j < N; ++j) {
            double dx = X[j].x - X[i].x, dy = X[j].y - X[i].y, dz = X[j].z - X[i].z;
            w -= M[i] * M[j] / sqrt(dx * dx + dy * dy + dz * dz + EPS2);
        }
    }
    return k + w;
}
static int crit_rung(double amag)
{
    if (amag <= 0) return 0;
    double tau = sqrt(2 * ETA * EPS / amag);
    int k = 0;
    while (k < 30 && DT / double(1 << k) > tau)
        ++k;
    return k;
}
static int level_of(long long t, long long ticks)
{
    if (t % ticks == 0) return 0;
    return MAXR - __builtin_ctzll(t);
}
static double hk(int r)
{
    return DT / double(1 << r);
}
static string RULE = "gadget";
static double MARGIN = 0; // env MARGIN=f: the oracle rules probe only where f |a| would ask a deeper rung
static long long skipped = 0, probed = 0;
// The rung for a step starting now: a = |a| now, ap = |a| at this particle's last force evaluation, hp the time since.
static double norm(V a)
{
    return sqrt(a.x * a.x + a.y * a.y + a.z * a.z);
}
static thread_local int CUR = -1; // the particle whose rung is being chosen (one per OpenMP thread)
static bool MOVING = false;       // env MOVING=1: a probe at time h ahead sees the others at X + V h too
static int FRAME = 0;      // env FRAME=k: the probed particle moves relative to its k nearest particles' mean velocity
static int BLOCKFRAME = 0; // env BLOCKFRAME=B: the mean velocity of i's block of B particles in Morton order
static vector<V> FR;       // the block frames of the substep (BLOCKFRAME)
static uint64_t spread21(uint64_t x)
{
    x &= 0x1fffff;
    x = (x | x << 32) & 0x1f00000000ffffull;
    x = (x | x << 16) & 0x1f0000ff0000ffull;
    x = (x | x << 8) & 0x100f00f00f00f00full;
    x = (x | x << 4) & 0x10c30c30c30c30c3ull;
    x = (x | x << 2) & 0x1249249249249249ull;
    return x;
}
// The particles in Morton order of their current positions, cut into blocks of BLOCKFRAME (the last one shorter):
// each particle's frame is its block's mass-weighted mean velocity (banyan: groups of the tree order).
static void block_frames()
{
    if (BLOCKFRAME <= 0) return;
    V lo{1e300, 1e300, 1e300}, hi{-1e300, -1e300, -1e300};
    for (int i = 0; i < N; ++i)
        lo.x = min(lo.x, X[i].x), lo.y = min(lo.y, X[i].y), lo.z = min(lo.z, X[i].z), hi.x = max(hi.x, X[i].x),
        hi.y = max(hi.y, X[i].y), hi.z = max(hi.z, X[i].z);
    const double size = max(max(hi.x - lo.x, hi.y - lo.y), hi.z - lo.z) * (1 + 1e-9);
    vector<pair<uint64_t, int>> key(N);
    for (int i = 0; i < N; ++i) {
        const double f = double(1 << 21) / size;
        key[i] = {spread21(uint64_t((X[i].x - lo.x) * f)) | spread21(uint64_t((X[i].y - lo.y) * f)) << 1 |
                      spread21(uint64_t((X[i].z - lo.z) * f)) << 2,
                  i};
    }
    sort(key.begin(), key.end());
    FR.assign(N, V{});
    for (int b = 0; b < N; b += BLOCKFRAME) {
        V u;
        double m = 0;
        const int e = min(N, b + BLOCKFRAME);
        for (int q = b; q < e; ++q) {
            const int k = key[q].second;
            u.x += M[k] * Vv[k].x, u.y += M[k] * Vv[k].y, u.z += M[k] * Vv[k].z, m += M[k];
        }
        for (int q = b; q < e; ++q)
            FR[key[q].second] = V{u.x / m, u.y / m, u.z / m};
    }
}
// The mass-weighted mean velocity of the FRAME particles nearest to particle i (itself included).
static V local_frame(int i)
{
    if (BLOCKFRAME > 0) return FR[i];
    if (FRAME <= 0) return V{};
    vector<pair<double, int>> d(N);
    for (int k = 0; k < N; ++k) {
        const double dx = X[k].x - X[i].x, dy = X[k].y - X[i].y, dz = X[k].z - X[i].z;
        d[k] = {dx * dx + dy * dy + dz * dz, k};
    }
    const int n = min(FRAME, N);
    partial_sort(d.begin(), d.begin() + n, d.end());
    V u;
    double m = 0;
    for (int q = 0; q < n; ++q) {
        const int k = d[q].second;
        u.x += M[k] * Vv[k].x, u.y += M[k] * Vv[k].y, u.z += M[k] * Vv[k].z, m += M[k];
    }
    return V{u.x / m, u.y / m, u.z / m};
}
static double acc_at(V p, double h)
{
    double ax = 0, ay = 0, az = 0;
    const int self = CUR;
    const double hs = MOVING ? h : 0.0;
#pragma omp atomic
    probe_count += N;
#pragma omp simd reduction(+ : ax, ay, az)
    for (int k = 0; k < N; ++k) {
        double dx = X[k].x + Vv[k].x * hs - p.x, dy = X[k].y + Vv[k].y * hs - p.y, dz = X[k].z + Vv[k].z * hs - p.z;
        double r2 = dx * dx + dy * dy + dz * dz + EPS2, ir = 1 / sqrt(r2), f = (k == self ? 0.0 : M[k]) * ir * ir * ir;
        ax += f * dx, ay += f * dy, az += f * dz;
    }
    return sqrt(ax * ax + ay * ay + az * az);
}
// The Frobenius norm of the tidal tensor at p (others where they are, the particle CUR left out): the dynamical time
// of Grudic & Hopkins (2020, arXiv:1910.06349) is its inverse square root. Counted as a probe where asked.
static double tidal_norm_at(V p, bool probe)
{
    double t[6] = {0, 0, 0, 0, 0, 0}; // xx yy zz xy xz yz
    const int self = CUR;
    if (probe) {
#pragma omp atomic
        probe_count += N;
    }
    for (int k = 0; k < N; ++k) {
        if (k == self) continue;
        const double dx = X[k].x - p.x, dy = X[k].y - p.y, dz = X[k].z - p.z;
        const double r2 = dx * dx + dy * dy + dz * dz + EPS2, ir = 1 / sqrt(r2), ir3 = M[k] * ir * ir * ir,
                     ir5 = 3 * ir3 / r2;
        t[0] += ir5 * dx * dx - ir3, t[1] += ir5 * dy * dy - ir3, t[2] += ir5 * dz * dz - ir3;
        t[3] += ir5 * dx * dy, t[4] += ir5 * dx * dz, t[5] += ir5 * dy * dz;
    }
    return sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2] + 2 * (t[3] * t[3] + t[4] * t[4] + t[5] * t[5]));
}
static int choose(double a, double ap, double hp, int level)
{
    int k = crit_rung(a);
    if (RULE == "tn" || RULE == "tnsym" || RULE == "tnmix") {
        // tn: dt = ETA / sqrt(|T|) at the start; tnsym: at both ends (the end's T summed at the predicted end);
        // tnmix: the smaller of GADGET's step and tn's, at the start.
        const double tau0 = ETA / sqrt(tidal_norm_at(X[CUR], false));
        const double taug = a > 0 ? sqrt(2 * ETA_G * EPS / a) : 1e30;
        for (k = level; k < 30; ++k) {
            const double h = hk(k);
            if (h > tau0 || (RULE == "tnmix" && h > taug)) continue;
            if (RULE == "tnsym") {
                const V x = X[CUR], v = Vv[CUR], g = A[CUR];
                const double tau1 =
                    ETA / sqrt(tidal_norm_at(V{x.x + v.x * h + 0.5 * g.x * h * h, x.y + v.y * h + 0.5 * g.y * h * h,
                                               x.z + v.z * h + 0.5 * g.z * h * h},
                                             true));
                if (h > tau1) continue;
            }
            return k;
        }
        return k;
    }
    if (RULE.rfind("shared", 0) == 0) return atoi(RULE.c_str() + 6);
    if (RULE == "index") return max(CUR % 5, level); // fixed rungs 0..4 by index (the reversal test)
    if (RULE == "frozen" && hp > 0) return -1;
    if (RULE == "gadget" || RULE == "frozen" || (hp <= 0 && RULE.rfind("radius", 0) != 0)) return max(k, level);
    double slope = (a - ap) / hp;
    // smallest k >= level whose step h satisfies the criterion at both ends (end |a| extrapolated linearly)
    for (k = level; k < 30; ++k) {
        double h = hk(k);
        // A step the start already refuses needs no look at its end (the rules below take the minimum of both).
        if (RULE != "mean" && RULE.rfind("radius", 0) != 0 && a > 0 && h > sqrt(2 * ETA * EPS / a)) continue;
        double ae = max(a + slope * h, 0.0);
        if (RULE == "jerk") { // vector extrapolation from the particle's last two forces
            const V g = A[CUR], p = Apv[CUR];
            const double f = h / hp;
            const V e{g.x + (g.x - p.x) * f, g.y + (g.y - p.y) * f, g.z + (g.z - p.z) * f};
            ae = norm(e);
        }
        if (RULE == "tidal") { // a(x_end) ~ a(x) + T (x_end - x), T the exact tidal tensor at x (others frozen)
            const V x = X[CUR], v = Vv[CUR], g = A[CUR];
            const V d{v.x * h + 0.5 * g.x * h * h, v.y * h + 0.5 * g.y * h * h, v.z * h + 0.5 * g.z * h * h};
            double t[3][3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
            for (int k = 0; k < N; ++k) {
                if (k == CUR) continue;
                const double r[3] = {X[k].x - x.x, X[k].y - x.y, X[k].z - x.z};
                const double r2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2] + EPS2, ir = 1 / sqrt(r2);
                const double ir3 = ir * ir * ir, ir5 = ir3 * ir * ir;
                for (int p = 0; p < 3; ++p)
                    for (int q = 0; q < 3; ++q)
                        t[p][q] += M[k] * (3 * r[p] * r[q] * ir5 - (p == q ? ir3 : 0));
            }
            const double dd[3] = {d.x, d.y, d.z};
            const V e{g.x + t[0][0] * dd[0] + t[0][1] * dd[1] + t[0][2] * dd[2],
                      g.y + t[1][0] * dd[0] + t[1][1] * dd[1] + t[1][2] * dd[2],
                      g.z + t[2][0] * dd[0] + t[2][1] * dd[1] + t[2][2] * dd[2]};
            ae = norm(e);
        }
        if ((RULE == "oracle" || RULE == "oracle3") && MARGIN > 0 && h <= sqrt(2 * ETA * EPS / (MARGIN * a))) {
            // The start allows the step even at MARGIN times its |a|: no probe (banyan's skip, issue 47)
#pragma omp atomic
            ++skipped;
            return k;
        }
        if (RULE == "oracle" || RULE == "oracle3") {
#pragma omp atomic
            ++probed;
            const V x = X[CUR], g = A[CUR], u = local_frame(CUR);
            const V v{Vv[CUR].x - u.x, Vv[CUR].y - u.y, Vv[CUR].z - u.z};
            ae = acc_at(V{x.x + v.x * h + 0.5 * g.x * h * h, x.y + v.y * h + 0.5 * g.y * h * h,
                          x.z + v.z * h + 0.5 * g.z * h * h},
                        h);
            if (RULE == "oracle3") {
                const double s = 0.5 * h;
                ae = max(ae, acc_at(V{x.x + v.x * s + 0.5 * g.x * s * s, x.y + v.y * s + 0.5 * g.y * s * s,
                                      x.z + v.z * s + 0.5 * g.z * s * s},
                                    s));
            }
        }
        double tau0 = a > 0 ? sqrt(2 * ETA * EPS / a) : 1e30, tau1 = ae > 0 ? sqrt(2 * ETA * EPS / ae) : 1e30;
        if (RULE == "radius") {
            // a smooth function of position alone: tau = 0.2 (r^2 + eps^2)^(3/4), exactly predictable
            const V x = X[CUR], v = Vv[CUR], g = A[CUR];
            const V e{x.x + v.x * h + 0.5 * g.x * h * h, x.y + v.y * h + 0.5 * g.y * h * h,
                      x.z + v.z * h + 0.5 * g.z * h * h};
            tau0 = 0.2 * pow(x.x * x.x + x.y * x.y + x.z * x.z + EPS2, 0.75);
            tau1 = 0.2 * pow(e.x * e.x + e.y * e.y + e.z * e.z + EPS2, 0.75);
        }
        if (RULE == "radius1") { // the same, start only (GADGET-like)
            const V x = X[CUR];
            tau0 = tau1 = 0.2 * pow(x.x * x.x + x.y * x.y + x.z * x.z + EPS2, 0.75);
        }
        double tau = RULE != "mean" ? min(tau0, tau1) : 0.5 * (tau0 + tau1);
        if (h <= tau) return k;
    }
    return k;
}
static vector<double> Tlast; // time of the particle's last force evaluation
static bool CHECK = false;   // count the rung choices a reversed run would make otherwise
static long long decisions = 0, mismatches = 0;
int main(int argc, char** argv)
{
    N = argc > 1 ? atoi(argv[1]) : 2048;
    string scheme = argc > 2 ? argv[2] : "quinn";
    RULE = argc > 3 ? argv[3] : "gadget";
    double tend = argc > 4 ? atof(argv[4]) : 200;
    EPS = 0.05, EPS2 = EPS * EPS, ETA = argc > 5 ? atof(argv[5]) : 0.025, DT = 0.25;
    if (getenv("DT")) DT = atof(getenv("DT"));          // the longest step (rung 0)
    if (getenv("ETA_G")) ETA_G = atof(getenv("ETA_G")); // GADGET's eta in rule tnmix
    // Hernquist (1990) sphere, G = M = a = 1, truncated at r = 100, isotropic f(E)
    mt19937_64 rng(12345);
    uniform_real_distribution<double> U(0, 1);
    X.resize(N), Vv.resize(N), Apv.resize(N), A.resize(N), M.assign(N, 1.0 / N), R.assign(N, 0), Aprev.assign(N, 0),
        Tlast.assign(N, 0);
    auto fE = [](double q) {
        if (q <= 0) return 0.0;
        if (q >= 1) q = 1 - 1e-12;
        double s = 1 - q * q;
        return (3 * asin(q) + q * sqrt(s) * (1 - 2 * q * q) * (8 * q * q * q * q - 8 * q * q - 3)) / pow(s, 2.5);
    };
    for (int i = 0; i < N; ++i) {
        double r;
        do {
            double u = sqrt(U(rng));
            r = u / (1 - u);
        } while (r > 100);
        double ct = 2 * U(rng) - 1, ph = 2 * M_PI * U(rng), st = sqrt(1 - ct * ct);
        X[i] = V{r * st * cos(ph), r * st * sin(ph), r * ct};
        double psi = 1 / (1 + r), vmax = sqrt(2 * psi);
        double pmax = 0;
        for (int s = 1; s < 200; ++s) {
            double v = vmax * s / 200.0;
            pmax = max(pmax, v * v * fE(sqrt(psi - 0.5 * v * v)));
        }
        double v;
        for (;;) {
            v = vmax * U(rng);
            if (U(rng) * pmax * 1.1 <= v * v * fE(sqrt(max(psi - 0.5 * v * v, 0.0)))) break;
        }
        double c2 = 2 * U(rng) - 1, p2 = 2 * M_PI * U(rng), s2 = sqrt(1 - c2 * c2);
        Vv[i] = V{v * s2 * cos(p2), v * s2 * sin(p2), v * c2};
        // virial units (E = -1/4): a = 1/3, as banyan's --ic hernquist
        X[i].x /= 3, X[i].y /= 3, X[i].z /= 3;
        Vv[i].x *= sqrt(3.0), Vv[i].y *= sqrt(3.0), Vv[i].z *= sqrt(3.0);
    }
    { // centre of mass frame
        V cx, cv;
        for (int i = 0; i < N; ++i)
            cx.x += X[i].x / N, cx.y += X[i].y / N, cx.z += X[i].z / N, cv.x += Vv[i].x / N, cv.y += Vv[i].y / N,
                cv.z += Vv[i].z / N;
        for (int i = 0; i < N; ++i)
            X[i].x -= cx.x, X[i].y -= cx.y, X[i].z -= cx.z, Vv[i].x -= cv.x, Vv[i].y -= cv.y, Vv[i].z -= cv.z;
    }
    // env BOOST=V: the whole sphere moves along x at V (a Galilean boost: the same physics, another frame)
    BOOST = getenv("BOOST") ? atof(getenv("BOOST")) : 0.0;
    for (int i = 0; i < N; ++i)
        Vv[i].x += BOOST;
    MOVING = getenv("MOVING") != nullptr;
    FRAME = getenv("FRAME") ? atoi(getenv("FRAME")) : 0;
    BLOCKFRAME = getenv("BLOCKFRAME") ? atoi(getenv("BLOCKFRAME")) : 0;
    vector<int> all(N);
    for (int i = 0; i < N; ++i)
        all[i] = i;
    const long long ticks = 1LL << MAXR;
    double t_now = 0;
    // per-level partial forces (hold): P[l][i]
    vector<vector<V>> P(MAXR + 1, vector<V>(N));
    auto total_acc = [&](int i) {
        V s;
        for (int l = 0; l <= R[i]; ++l)
            s.x += P[l][i].x, s.y += P[l][i].y, s.z += P[l][i].z;
        return s;
    };
    {
        vector<V> f;
        forces(all, all, f);
        for (int i = 0; i < N; ++i)
            A[i] = f[i], P[0][i] = f[i], Aprev[i] = norm(f[i]), CUR = i, R[i] = max(choose(norm(f[i]), 0, 0, 0), 0);
    }
    // hold: the kick of the levels >= L with the current rungs, weight w (1/2: half kicks)
    auto hold_kick = [&](int L, double w) {
        int D = 0;
        for (int i = 0; i < N; ++i)
            D = max(D, R[i]);
        vector<V> acc_l(N);
        vector<vector<V>> F(MAXR + 2);
        vector<vector<int>> sets(MAXR + 2);
        for (int l = L; l <= D; ++l) {
            for (int i = 0; i < N; ++i)
                if (R[i] >= l) sets[l].push_back(i);
            vector<V> f;
            forces(sets[l], sets[l], f);
            F[l].assign(N, V{});
            for (size_t q = 0; q < sets[l].size(); ++q)
                F[l][sets[l][q]] = f[q];
        }
        for (int i = 0; i < N; ++i) {
            if (R[i] < L) continue;
            V dv;
            for (int l = L; l <= R[i]; ++l) {
                // partial force of level l: pairs whose slower member is on rung l
                V p = F[l][i];
                if (l + 1 <= R[i]) p.x -= F[l + 1][i].x, p.y -= F[l + 1][i].y, p.z -= F[l + 1][i].z;
                P[l][i] = p;
                dv.x += hk(l) * p.x, dv.y += hk(l) * p.y, dv.z += hk(l) * p.z;
            }
            Vv[i].x += w * dv.x, Vv[i].y += w * dv.y, Vv[i].z += w * dv.z;
        }
    };
    double e0 = energy(), worst50 = 0, worst = 0;
    long long substeps = 0;
    int deepest = 0;
    // REVERSE: run to T_END, reverse the velocities and run T_END again, which must end where the run began: true
    // for a time-symmetric scheme, up to round-off. Every rung, the first ones too, is chosen by the rule.
    const bool reverse = getenv("REVERSE") != nullptr;
    CHECK = getenv("CHECK") != nullptr;
    MARGIN = getenv("MARGIN") ? atof(getenv("MARGIN")) : 0.0;
    const vector<V> X0 = X;
    for (int pass = 0; pass < (reverse ? 2 : 1); ++pass) {
        if (pass == 1)
            for (int i = 0; i < N; ++i)
                Vv[i].x = -Vv[i].x, Vv[i].y = -Vv[i].y, Vv[i].z = -Vv[i].z;
        if (reverse)
#pragma omp parallel for
            for (int i = 0; i < N; ++i) {
                CUR = i;
                R[i] = max(choose(norm(A[i]), norm(A[i]), 1.0, 0), 0);
            }
        for (long long step = 0; step * DT < tend - 1e-12; ++step) {
            if (scheme == "hold") hold_kick(0, 0.5); // opening kicks of every level
            for (long long t = 0; t < ticks;) {
                int D = 0;
                for (int i = 0; i < N; ++i)
                    D = max(D, R[i]);
                deepest = max(deepest, D);
                long long span = ticks >> D, next = (t / span + 1) * span;
                int lev0 = level_of(t, ticks);
                if (scheme == "quinn") {
                    for (int i = 0; i < N; ++i)
                        if (R[i] >= lev0) {
                            double h = 0.5 * hk(R[i]);
                            Vv[i].x += h * A[i].x, Vv[i].y += h * A[i].y, Vv[i].z += h * A[i].z;
                        }
                }
                double d = DT * double(next - t) / double(ticks);
                for (int i = 0; i < N; ++i)
                    X[i].x += d * Vv[i].x, X[i].y += d * Vv[i].y, X[i].z += d * Vv[i].z;
                t = next;
                t_now = step * DT + DT * double(t) / double(ticks);
                ++substeps;
                int L = level_of(t, ticks);
                if (scheme == "quinn") {
                    vector<int> act;
                    for (int i = 0; i < N; ++i)
                        if (R[i] >= L) act.push_back(i);
                    vector<V> f;
                    forces(act, all, f);
                    // The closing kicks first, then each active particle's rung, which touches only its own entries
                    // (the rules read the frozen X, and the frames the kicked velocities).
                    for (size_t q = 0; q < act.size(); ++q) {
                        int i = act[q];
                        double h = 0.5 * hk(R[i]);
                        Vv[i].x += h * f[q].x, Vv[i].y += h * f[q].y, Vv[i].z += h * f[q].z;
                        Apv[i] = A[i];
                        A[i] = f[q];
                    }
                    block_frames();
#pragma omp parallel for schedule(dynamic, 4)
                    for (size_t q = 0; q < act.size(); ++q) {
                        int i = act[q];
                        double a = norm(f[q]);
                        CUR = i;
                        if (CHECK) { // the rung the reversed run would choose here for the step just ended
                            Vv[i].x = -Vv[i].x, Vv[i].y = -Vv[i].y, Vv[i].z = -Vv[i].z;
                            const int back = choose(a, a, 1.0, L);
                            Vv[i].x = -Vv[i].x, Vv[i].y = -Vv[i].y, Vv[i].z = -Vv[i].z;
#pragma omp atomic
                            ++decisions;
                            if (back != R[i]) {
#pragma omp atomic
                                ++mismatches;
                            }
                        }
                        int nr = choose(a, Aprev[i], t_now - Tlast[i], L);
                        if (nr >= 0) R[i] = nr;
                        Aprev[i] = a, Tlast[i] = t_now;
                    }
                } else {
                    hold_kick(L, 0.5); // closing kicks, old rungs
                    for (int i = 0; i < N; ++i)
                        if (R[i] >= L) {
                            Apv[i] = A[i];
                            A[i] = total_acc(i);
                            CUR = i;
                            double a = norm(A[i]);
                            int nr = choose(a, Aprev[i], t_now - Tlast[i], L);
                            if (nr >= 0) R[i] = nr;
                            Aprev[i] = a, Tlast[i] = t_now;
                        }
                    if (t < ticks) hold_kick(L, 0.5); // opening kicks, new rungs
                }
            }
            double e = energy(), de = fabs((e - e0) / e0);
            worst = max(worst, de);
            if (t_now <= 50 + 1e-9) worst50 = worst;
            static double next_print = 10;
            if (t_now >= next_print - 1e-9) {
                next_print += 10;
                int hist[16] = {0};
                for (int i = 0; i < N; ++i)
                    hist[min(R[i], 15)]++;
                printf("t %6.1f dE/E %+.3e worst %.3e evals/N %.1f rungs", t_now, (e - e0) / e0, worst,
                       double(pair_count) / N / N);
                for (int k = 0; k <= deepest; ++k)
                    printf(" %d", hist[k]);
                printf("\n");
                fflush(stdout);
            }
        }
    }
    if (reverse) {
        double off = 0;
        int moved = 0;
        for (int i = 0; i < N; ++i) {
            const double dx = X[i].x - X0[i].x, dy = X[i].y - X0[i].y, dz = X[i].z - X0[i].z;
            const double d = sqrt(dx * dx + dy * dy + dz * dz);
            off = max(off, d), moved += d > 1e-9 ? 1 : 0;
        }
        printf("REVERSE: back at the start within %.3e; %d of %d particles off by more than 1e-9\n", off, moved, N);
    }
    if (CHECK)
        printf("CHECK: %lld rung choices, %lld of them (%.2f %%) the reversed run would make otherwise\n", decisions,
               mismatches, 100.0 * double(mismatches) / double(max(decisions, 1LL)));
    if (MARGIN > 0) printf("MARGIN %g: %lld rung choices skipped their probe, %lld probed\n", MARGIN, skipped, probed);
    printf("RESULT %s %s N %d eta %g: worst |dE/E| to t=50 %.3e, to t=%g %.3e (ratio %.2f), pair evaluations / N^2 "
           "%.1f (and %.1f for the rules' probes), substeps %lld, deepest %d\n",
           scheme.c_str(), RULE.c_str(), N, ETA, worst50, tend, worst, worst / worst50, double(pair_count) / N / N,
           double(probe_count) / N / N, substeps, deepest);
}
