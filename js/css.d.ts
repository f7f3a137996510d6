// Ambient declarations for the type check (`npm run lint`): the CSS imports esbuild bundles.
declare module "*.css";
