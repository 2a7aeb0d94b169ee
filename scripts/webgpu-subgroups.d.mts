// The types of webgpu-subgroups.mjs, for the TypeScript tests that import it.
export function subgroupsWithheld(setting: string | undefined): boolean;
export function withoutSubgroups(source: GPU): GPU;
