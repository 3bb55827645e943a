import type { ApiClient } from '../../api/client';

/** GET /profiles/:id/cpuprofile, for the download and the flame graph; throws with what the API said. */
export async function fetchCpuprofile(client: ApiClient, profileId: string, signal?: AbortSignal): Promise<Response> {
  const response = await client.fetch(`/profiles/${encodeURIComponent(profileId)}/cpuprofile`, signal ? { signal } : {});
  if (!response.ok) {
    const body = (await response.json().catch(() => ({}))) as { error?: { message?: string } };
    throw new Error(`HTTP ${response.status}: ${body.error?.message ?? response.statusText}`);
  }
  return response;
}
