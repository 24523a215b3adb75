/**
 * @file integrate.cl
 * @brief Time integration on the device (paper section 3.1): the kick and drift of the shared-time-step leapfrog,
 *        the per-group sums of energy, momentum and angular momentum, and the small kernels that take particles
 *        back to the order of the input for output. Driver: core/simulation/simulation.cpp. Same kernels as
 *        kernels_cu/integrate.cu.
 *
 * Kick and drift use fma() for every update, so that each component is rounded once on every device and compiler
 * (no contraction left to the compiler's choice) and a CPU reference with std::fma reproduces them bit for bit.
 */

/* First half of a kick-drift-kick step (the predictor of Hut et al. 1995): v += a dt/2, then x += v dt, with the
 * accelerations of the last force evaluation. pos.w (mass) is left as it is; vel.w gets |a|, which the build
 * carries along with the particle and the next walk's relative criterion reads (TreeForces::set_relative).
 * Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void integrateKickDrift(__global bn_f4* pos, __global bn_f4* vel, __global const bn_f4* acc, bn_u32 n, float half_dt,
                        float dt)
{
    const bn_u32 i = (bn_u32)get_global_id(0);
    if (i >= n) return;
    const bn_f4 a = acc[i];
    bn_f4 v = vel[i];
    bn_f4 x = pos[i];
    v.x = fma(a.x, half_dt, v.x);
    v.y = fma(a.y, half_dt, v.y);
    v.z = fma(a.z, half_dt, v.z);
    x.x = fma(v.x, dt, x.x);
    x.y = fma(v.y, dt, x.y);
    x.z = fma(v.z, dt, x.z);
    v.w = sqrt(fma(a.z, a.z, fma(a.y, a.y, a.x * a.x)));
    vel[i] = v;
    pos[i] = x;
}

/* Second half of the step (the corrector): v += a dt/2 with the accelerations at the new positions. Work-group
 * BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void integrateKick(__global bn_f4* vel, __global const bn_f4* acc, bn_u32 n, float half_dt)
{
    const bn_u32 i = (bn_u32)get_global_id(0);
    if (i >= n) return;
    const bn_f4 a = acc[i];
    bn_f4 v = vel[i];
    v.x = fma(a.x, half_dt, v.x);
    v.y = fma(a.y, half_dt, v.y);
    v.z = fma(a.z, half_dt, v.z);
    vel[i] = v;
}

/* Block time steps (Quinn et al. 1997; GADGET-4, Springel et al. 2021): particle i moves with the step
 * dt_max 2^-rung[i], and a substep ends where the deepest rung's step does. At the start of a substep the particles
 * that start a step (rung >= level: those whose last step ended here) get their opening half kick, each with its
 * own half step half_max 2^-rung (ldexp: exact, so rung 0 kicks by half_max to the bit), and vel.w = |a| as
 * integrateKickDrift writes it; then every particle drifts by `drift`, the substep's length. With one rung (level 0,
 * rung 0) the same operations as integrateKickDrift. Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void integrateBlockKickDrift(__global bn_f4* pos, __global bn_f4* vel, __global const bn_f4* acc,
                             __global const bn_u32* rung, bn_u32 n, bn_u32 level, float half_max, float drift)
{
    const bn_u32 i = (bn_u32)get_global_id(0);
    if (i >= n) return;
    bn_f4 v = vel[i];
    bn_f4 x = pos[i];
    const bn_u32 k = rung[i];
    if (k >= level) {
        const bn_f4 a = acc[i];
        const float half_k = ldexp(half_max, -(int)k);
        v.x = fma(a.x, half_k, v.x);
        v.y = fma(a.y, half_k, v.y);
        v.z = fma(a.z, half_k, v.z);
        v.w = sqrt(fma(a.z, a.z, fma(a.y, a.y, a.x * a.x)));
        vel[i] = v;
    }
    x.x = fma(v.x, drift, x.x);
    x.y = fma(v.y, drift, x.y);
    x.z = fma(v.z, drift, x.z);
    pos[i] = x;
}

/* The end of a substep with block time steps: the active particles (rung >= level, those whose step ends here, with
 * forces at the new positions) get their closing half kick with the half step of the rung they had (only when
 * kick != 0: the start of a run chooses rungs without kicking), then their new rung, max(bn_block_rung(a), level):
 * the step the criterion asks for, but no longer than one whose boundaries line up with the current time (level is
 * the shallowest such rung). Particles not active keep theirs. Every particle's rung is then counted into hist
 * (BANYAN_RUNG_BINS counters, the last for rungs beyond max_rung, which the driver refuses): the host reads the
 * deepest occupied rung, and so the next substep's length, from it. Work-group BANYAN_WG; local memory
 * BANYAN_RUNG_BINS words. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void integrateBlockKick(__global bn_f4* vel, __global const bn_f4* acc, __global bn_u32* rung, bn_u32 n,
                        bn_u32 level, float half_max, bn_u32 kick, double dt2_max, double c2, bn_u32 max_rung,
                        __global bn_u32* hist)
{
    __local bn_u32 local_hist[BANYAN_RUNG_BINS];
    const bn_u32 lid = (bn_u32)get_local_id(0);
    for (bn_u32 b = lid; b < BANYAN_RUNG_BINS; b += BANYAN_WG) local_hist[b] = 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    const bn_u32 i = (bn_u32)get_global_id(0);
    if (i < n) {
        bn_u32 k = rung[i];
        if (k >= level) {
            const bn_f4 a = acc[i];
            if (kick) {
                const float half_k = ldexp(half_max, -(int)k);
                bn_f4 v = vel[i];
                v.x = fma(a.x, half_k, v.x);
                v.y = fma(a.y, half_k, v.y);
                v.z = fma(a.z, half_k, v.z);
                vel[i] = v;
            }
            k = max(bn_block_rung(a.x, a.y, a.z, dt2_max, c2, max_rung), level);
            rung[i] = k;
        }
        atomic_inc(&local_hist[min(k, max_rung + 1u)]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (bn_u32 b = lid; b < BANYAN_RUNG_BINS; b += BANYAN_WG)
        if (local_hist[b]) bn_atomic_add_u32(&hist[b], local_hist[b]);
}

/* The time-symmetric rung choice (Simulation::probe_rungs; Makino, Hut, Kaplan & Saygin 2006, New Astron. 12, 124:
 * a step must satisfy the criterion at both of its ends). integrateBlockKick chose each active particle's rung from
 * its acceleration at the step's start; this kernel writes where each pending particle would be at the end of a
 * step of that rung, x + (v - u) h + a h^2 / 2 with h = full_max 2^-rung (its velocity synchronised, after the
 * closing kick: what the step's opening kick and drift give), into predicted, and the other particles' positions
 * unchanged. u is the velocity of the centre of mass of all particles, momentum over mass from the energy sums
 * (totals: integrateEnergyTotals, summed over ranks): the others stay where they are, so the prediction is made in
 * the frame where the system as a whole is at rest, whatever frame the run is in.
 * first != 0 marks the pending particles first: those of rung >= level whose end could ask for a deeper rung
 * (bn_block_probe_needed, with dt2_max and c2 as integrateBlockKick's). Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void integrateBlockPredict(__global const bn_f4* pos, __global const bn_f4* vel, __global const bn_f4* acc,
                           __global const bn_u32* rung, bn_u32 n, bn_u32 level, float full_max,
                           __global const double* totals, double dt2_max, double c2, bn_u32 first,
                           __global bn_u32* pending, __global bn_f4* predicted)
{
    const bn_u32 i = (bn_u32)get_global_id(0);
    if (i >= n) return;
    bn_f4 x = pos[i];
    const bn_u32 k = rung[i];
    const bn_f4 a = acc[i];
    const bn_u32 p =
        first ? (k >= level ? bn_block_probe_needed(a.x, a.y, a.z, dt2_max, c2, k) : 0u) : pending[i];
    if (first) pending[i] = p;
    if (p) {
        const bn_f4 v = vel[i];
        const float ux = (float)(totals[2] / totals[8]), uy = (float)(totals[3] / totals[8]);
        const float uz = (float)(totals[4] / totals[8]);
        const float h = ldexp(full_max, -(int)k);
        const float h2 = 0.5f * h * h;
        x.x = fma(a.x, h2, fma(v.x - ux, h, x.x));
        x.y = fma(a.y, h2, fma(v.y - uy, h, x.y));
        x.z = fma(a.z, h2, fma(v.z - uz, h, x.z));
    }
    predicted[i] = x;
}

/* The time-symmetric rung choice, after a walk at the predicted positions: a pending particle whose acceleration
 * there (acc) asks for no deeper rung than its own (bn_block_rung) keeps it and is done; otherwise it goes one rung
 * deeper and, unless last, stays pending for the next probe (at the end of the shorter step). Every particle's
 * rung is then counted into hist as integrateBlockKick counts it. Work-group BANYAN_WG; local memory
 * BANYAN_RUNG_BINS words. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void integrateBlockProbe(__global const bn_f4* acc, __global bn_u32* rung, __global bn_u32* pending, bn_u32 n,
                         double dt2_max, double c2, bn_u32 max_rung, bn_u32 last, __global bn_u32* hist)
{
    __local bn_u32 local_hist[BANYAN_RUNG_BINS];
    const bn_u32 lid = (bn_u32)get_local_id(0);
    for (bn_u32 b = lid; b < BANYAN_RUNG_BINS; b += BANYAN_WG) local_hist[b] = 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    const bn_u32 i = (bn_u32)get_global_id(0);
    if (i < n) {
        bn_u32 k = rung[i];
        if (pending[i]) {
            const bn_f4 a = acc[i];
            if (bn_block_rung(a.x, a.y, a.z, dt2_max, c2, max_rung) <= k) {
                pending[i] = 0u;
            } else {
                k = min(k + 1u, max_rung + 1u);
                rung[i] = k;
                if (last) pending[i] = 0u;
            }
        }
        atomic_inc(&local_hist[min(k, max_rung + 1u)]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (bn_u32 b = lid; b < BANYAN_RUNG_BINS; b += BANYAN_WG)
        if (local_hist[b]) bn_atomic_add_u32(&hist[b], local_hist[b]);
}

/* The BANYAN_ENERGY_TERMS terms of one particle, in double precision: kinetic energy m v^2 / 2, potential energy
 * m phi / 2 (each pair counted from both ends), momentum m v, angular momentum m x cross v, mass m. */
inline void integrate_energy_terms(bn_f4 p, bn_f4 v, float phi, double* t)
{
    const double m = p.w;
    const double x = p.x, y = p.y, z = p.z;
    const double vx = v.x, vy = v.y, vz = v.z;
    t[0] = 0.5 * m * (vx * vx + vy * vy + vz * vz);
    t[1] = 0.5 * m * (double)phi;
    t[2] = m * vx;
    t[3] = m * vy;
    t[4] = m * vz;
    t[5] = m * (y * vz - z * vy);
    t[6] = m * (z * vx - x * vz);
    t[7] = m * (x * vy - y * vx);
    t[8] = m;
}

/* Per-group sums of the energy terms of particles [0, n): partials[BANYAN_ENERGY_TERMS * group + k]. Each
 * work-item accumulates its particles with a grid stride, then the group adds the work-items' sums in a fixed tree
 * (stride BANYAN_WG/2 down to 1), so the sums depend only on n, the grid and the work-group size: a restarted run
 * logs the same energies as one that ran straight through. Work-group BANYAN_WG; local memory
 * BANYAN_ENERGY_TERMS * BANYAN_WG doubles. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void integrateEnergyPartials(__global const bn_f4* pos, __global const bn_f4* vel, __global const bn_f4* acc,
                             bn_u32 n, __global double* partials)
{
    __local double s[BANYAN_ENERGY_TERMS * BANYAN_WG];
    const bn_u32 lid = (bn_u32)get_local_id(0);
    double sum[BANYAN_ENERGY_TERMS];
    double t[BANYAN_ENERGY_TERMS];
    for (int k = 0; k < BANYAN_ENERGY_TERMS; ++k) sum[k] = 0.0;
    for (bn_u32 i = (bn_u32)get_group_id(0) * BANYAN_WG + lid; i < n; i += (bn_u32)get_num_groups(0) * BANYAN_WG) {
        integrate_energy_terms(pos[i], vel[i], acc[i].w, t);
        for (int k = 0; k < BANYAN_ENERGY_TERMS; ++k) sum[k] += t[k];
    }
    for (int k = 0; k < BANYAN_ENERGY_TERMS; ++k) s[k * BANYAN_WG + lid] = sum[k];
    BN_BLOCK_TREE_SUM(s, lid, BANYAN_ENERGY_TERMS);
    if (lid < BANYAN_ENERGY_TERMS) partials[BANYAN_ENERGY_TERMS * get_group_id(0) + lid] = s[lid * BANYAN_WG];
}

/* The totals of the per-group partials: out[k] = sum over groups of partials[BANYAN_ENERGY_TERMS * g + k], in a
 * fixed order. Launched as one work-group. Work-group BANYAN_WG; local memory BANYAN_ENERGY_TERMS * BANYAN_WG
 * doubles. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void integrateEnergyTotals(__global const double* partials, bn_u32 groups, __global double* out)
{
    __local double s[BANYAN_ENERGY_TERMS * BANYAN_WG];
    const bn_u32 lid = (bn_u32)get_local_id(0);
    double sum[BANYAN_ENERGY_TERMS];
    for (int k = 0; k < BANYAN_ENERGY_TERMS; ++k) sum[k] = 0.0;
    for (bn_u32 g = lid; g < groups; g += BANYAN_WG)
        for (int k = 0; k < BANYAN_ENERGY_TERMS; ++k) sum[k] += partials[BANYAN_ENERGY_TERMS * g + k];
    for (int k = 0; k < BANYAN_ENERGY_TERMS; ++k) s[k * BANYAN_WG + lid] = sum[k];
    BN_BLOCK_TREE_SUM(s, lid, BANYAN_ENERGY_TERMS);
    if (lid < BANYAN_ENERGY_TERMS) out[lid] = s[lid * BANYAN_WG];
}

/* Particles from device (tree) order back to the order of the input, for snapshots, one chunk of ids at a time:
 * out[ids[i] - first] = in[i] for the particles with first <= ids[i] < first + count, for positions, velocities and
 * accelerations with potentials. Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void integrateToInputOrder(__global const bn_f4* pos, __global const bn_f4* vel, __global const bn_f4* acc,
                           __global const bn_u32* ids, bn_u32 n, bn_u32 first, bn_u32 count,
                           __global bn_f4* pos_out, __global bn_f4* vel_out, __global bn_f4* acc_out)
{
    const bn_u32 i = (bn_u32)get_global_id(0);
    if (i >= n) return;
    const bn_u32 j = ids[i] - first; /* huge (wrapped) below first */
    if (j >= count) return;
    pos_out[j] = pos[i];
    vel_out[j] = vel[i];
    acc_out[j] = acc[i];
}

/* Positions of two particles picked by id (the central particles of a merger): out[0] = pos of id_a, out[1] = pos
 * of id_b; entries of ids that are absent stay as they were. Work-group BANYAN_WG; no local memory. */
__kernel __attribute__((reqd_work_group_size(BANYAN_WG, 1, 1)))
void integrateTrack(__global const bn_f4* pos, __global const bn_u32* ids, bn_u32 n, bn_u32 id_a, bn_u32 id_b,
                    __global bn_f4* out)
{
    const bn_u32 i = (bn_u32)get_global_id(0);
    if (i >= n) return;
    const bn_u32 id = ids[i];
    if (id == id_a) out[0] = pos[i];
    if (id == id_b) out[1] = pos[i];
}
